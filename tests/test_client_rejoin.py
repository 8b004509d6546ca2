"""A joiner killed in each phase of its join and restarted with the same identity, in process
(the Sim of test_client_state_machine, with parameter hashes chained over the results applied).
The kill happens the moment the coordinator puts the joiner in the phase: from then on its old
state machine does nothing (a dead process), the coordinator withdraws it (what the server does
when its connection closes), and a fresh state machine with the same identity takes its place."""

from dataclasses import replace

import pytest

from psyche_client.client.applied import AppliedSet
from psyche_client.client.state_machine import ClientStateMachine
from psyche_coordinator_core import ClientPhase, ClientState

from .test_client_state_machine import Sim
from .test_client_sync import SYNC, applied_by

PHASES = (ClientPhase.Queued, ClientPhase.Syncing, ClientPhase.WarmingUp, ClientPhase.Active)


def phase_of(sim, k):
    """Client k's phase, None when it is not a healthy client of the epoch."""
    st = sim.state
    i = st.client_index(sim.ids[k].public)
    return None if i is None or st.clients[i].state != ClientState.Healthy else st.clients[i].phase


class Dead:
    """A killed client: it answers nothing and serves nothing."""

    def kept_set(self, step):
        return None

    def __getattr__(self, name):
        return lambda *args, **kwargs: []


class KillSim(Sim):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.victim, self.target = None, None
        self.kills = []  # (phase, step)
        self.warming = set()  # steps whose round counts the victim as warming up
        self.restarts = []  # steps in which a new process took the victim's place
        self.dropped = []  # steps in which a health check dropped the victim

    def _apply(self, op, args):
        super()._apply(op, args)
        st = self.state
        i = st.client_index(self.ids[self.victim].public) if self.victim is not None else None
        if i is not None and st.run_state.active and st.current_round.warming >> i & 1:
            self.warming.add(st.step)
        if (i is not None and st.clients[i].state == ClientState.Dropped
                and (not self.dropped or self.dropped[-1] != st.step)):
            self.dropped.append(st.step)
        if self.target is not None and phase_of(self, self.victim) == self.target:
            self.kills.append((self.target, self.state.step))
            self.target = None
            self.sms[self.victim] = Dead()
            super()._apply("withdraw", {"signer": self.ids[self.victim].public})

    def restart(self):
        self.restarts.append(self.state.step)
        ident = self.ids[self.victim]
        self.sms[self.victim] = ClientStateMachine(ident.public, ident.public)


@pytest.mark.parametrize("at_once", [False, True])
def test_a_joiner_killed_in_each_phase_rejoins_and_the_incumbents_never_notice(at_once):
    """`at_once`: each restart joins in the round its process was killed in. Else a process
    killed in a training phase (WarmingUp, Active) is restarted once the rounds it was to
    train are past the health check's reach (three rounds); one killed while Queued or
    Syncing, never a trainer, at once."""
    sim = KillSim(3, config=replace(SYNC, total_steps=200, epoch_time=400, kept_rounds=400,
                                    sync_warmup_rounds=3), chained=True)
    sim.run(lambda s: s.run_state.active and s.step >= 4)
    helper = sim.add_client()  # takes the one sync slot
    sim._do(helper, sim.sms[helper].on_state(sim.state, sim.t))
    assert phase_of(sim, helper) in (ClientPhase.Syncing, ClientPhase.WarmingUp)
    joiner = sim.victim = sim.add_client()
    me = sim.ids[joiner].public
    entered = []  # (phase, since, step, queue) in the first state after each restart
    for target in PHASES:
        sim.target = target
        if target == ClientPhase.Queued:
            sim._do(joiner, sim.sms[joiner].on_state(sim.state, sim.t))
        else:
            sim.run(lambda s: sim.target is None)
        assert isinstance(sim.sms[joiner], Dead) and phase_of(sim, joiner) is None
        c = sim.state.clients[sim.state.client_index(me)]
        assert c.state == ClientState.Withdrawn
        if not at_once and target in (ClientPhase.WarmingUp, ClientPhase.Active):
            killed_at = sim.state.step
            sim.run(lambda s: s.step >= killed_at + 3)
        sim.restart()
        sim._do(joiner, sim.sms[joiner].on_state(sim.state, sim.t))
        st = sim.state
        i = st.client_index(me)
        queue = sorted((x.since, k) for k, x in enumerate(st.clients)
                       if x.state == ClientState.Healthy and x.phase == ClientPhase.Queued)
        entered.append((phase_of(sim, joiner), st.clients[i].since, st.step, queue, i))
    assert [k[0] for k in sim.kills] == list(PHASES)
    assert (sim.restarts == [k[1] for k in sim.kills]) == at_once

    # it re-enters in the step it joins: at the queue's tail, or syncing when the slot is free
    for p, since, step, queue, i in entered:
        assert since == step
        if p == ClientPhase.Queued:
            assert queue[-1] == (since, i)
        else:
            assert p in (ClientPhase.Syncing, ClientPhase.WarmingUp)  # instant peers here
    assert entered[0][0] == ClientPhase.Queued  # the helper still held the slot
    assert any("[SYNC] queued: position 1 of 1" == t for who, t in sim.logs if who == joiner)

    # the last one goes on to Active and has a result applied
    def results_of(k, step):
        return sim.sms[k].sync.sets.get(step, AppliedSet(step, False, ())).results

    def applied_mine(s):
        return phase_of(sim, joiner) == ClientPhase.Active and any(
            r.trainer == me for step in applied_by(sim, 0) for r in results_of(0, step))
    sim.run(applied_mine)
    assert sim.warming, "the joiner was never seen warming up"
    # nor of a round that started before its process did (it took its slot back in the round
    # it was killed in: the round counts the slot as a trainer, not the new process)
    assert not [step for step in applied_by(sim, 0)
                if (step in sim.warming or step in sim.restarts)
                and any(r.trainer == me for r in results_of(0, step))]

    # the incumbents applied the same sets at every step and hold the same parameters
    mine = [applied_by(sim, k) for k in range(3)]
    assert len(mine[0]) >= 10 and mine[0] == mine[1] == mine[2]
    assert sim.hashes[0] == sim.hashes[1] == sim.hashes[2]
    for k in range(3):
        assert phase_of(sim, k) == ClientPhase.Active
        assert not [t for who, t in sim.logs if who == k and ("DESYNC" in t or "lagging" in t)]
    # no process of it is blamed for a round its slot's previous process was to train (the
    # core's health rule: a client answers only for rounds since it entered its phase)
    assert not sim.dropped
    # a restarted joiner missing the results of rounds its previous process trained is no
    # DESYNC: it fetches those sets like any joiner
    assert not [t for who, t in sim.logs if who == joiner and "DESYNC" in t]
    # what the restarted joiner applied is what they applied
    for step, commits in applied_by(sim, joiner).items():
        assert commits == mine[0][step], step

