"""Joining a live run with the client state machine against the real core, in process (the Sim
of test_client_state_machine): the sync phases (Queued, Syncing, WarmingUp, Active), the applied
sets peers keep and serve, lag back to syncing, and a DESYNC that never applies part of a set."""

from dataclasses import replace

from psyche_client.client.actions import Log, Publish
from psyche_client.client.applied import AppliedSet, ModelLine
from psyche_client.client.consensus import round_consensus
from psyche_client.client.results import TrainingResult, dummy_payload
from psyche_coordinator_core import ClientPhase, ClientState, RunState

from .test_client_state_machine import CONFIG, Sim, sim_params

SYNC = replace(CONFIG, epoch_time=60, total_steps=80, max_syncing=1, sync_warmup_rounds=2,
               init_min_clients=3)


def phase_of(sim, k):
    i = sim.state.client_index(sim.ids[k].public)
    return None if i is None else sim.state.clients[i].phase


def logs_of(sim, k):
    return [text for who, text in sim.logs if who == k]


def applied_by(sim, k):
    """{step: commitments} client k applied (its last Apply of each step)."""
    return {step: c for who, step, c in sim.applies if who == k}


def test_a_desync_fetches_the_applied_set_and_never_applies_part_of_it():
    """Client 0 never receives client 1's results, which the other witnesses vouch for: it
    must apply exactly the sets everyone else applies (fetched from a peer), not the part it
    holds (the old behaviour, which kept a diverged model for good)."""
    sim = Sim(4, config=replace(CONFIG, epoch_time=60), deaf={(0, 1)})
    sim.run(lambda s: s.epoch == 1 and s.run_state == RunState.RoundWitness)
    mine, theirs = applied_by(sim, 0), applied_by(sim, 2)
    assert len(theirs) >= 5
    assert mine == {s: c for s, c in theirs.items() if s in mine}
    assert set(theirs) <= set(mine)  # nothing skipped either
    assert any("DESYNC" in t for t in logs_of(sim, 0))
    served = [f for f in sim.fetches if f[0] == 0]
    assert served and all(peer is not None for _, _, peer in served)
    # every set it applied holds client 1's result where client 2's does
    one = sim.ids[1].public
    assert any(r.trainer == one for s in theirs for r in sim.sms[0].sync.sets.get(s, AppliedSet(
        s, False, ())).results)


def test_a_joiner_syncs_warms_up_and_turns_active_within_the_epoch():
    sim = Sim(3, config=SYNC)
    start = sim.run(lambda s: s.run_state.active and s.step >= 6)
    first, second = sim.add_client(), sim.add_client()
    sim._do(first, sim.sms[first].on_state(sim.state, sim.t))
    sim._do(second, sim.sms[second].on_state(sim.state, sim.t))
    # max_syncing 1: the first syncs at once (here instantly: its peers answer at once)
    assert phase_of(sim, first) in (ClientPhase.Syncing, ClientPhase.WarmingUp)
    assert phase_of(sim, second) == ClientPhase.Queued
    assert "[SYNC] queued: position 1 of 1" in logs_of(sim, second)
    # the position again after a minute without change, not before
    n = len(logs_of(sim, second))
    sim._do(second, sim.sms[second].on_timer(sim.t + 30))
    assert len(logs_of(sim, second)) == n
    sim._do(second, sim.sms[second].on_timer(sim.t + 61))
    assert logs_of(sim, second)[n:] == ["[SYNC] queued: position 1 of 1"]

    phases = {first: [ClientPhase.Syncing], second: []}

    def until(s):
        for k in phases:
            p = phase_of(sim, k)
            if not phases[k] or phases[k][-1] != p:
                phases[k].append(p)
        trainer = sim.ids[first].public
        return phase_of(sim, first) == ClientPhase.Active and any(
            r.trainer == trainer for k in range(3) for st in applied_by(sim, k)
            for r in sim.sms[k].sync.sets.get(st, AppliedSet(st, False, ())).results)
    end = sim.run(until)
    assert end.epoch == start.epoch, "the joiner should be active within the epoch it joined"
    assert phases[first] == [ClientPhase.Syncing, ClientPhase.WarmingUp, ClientPhase.Active]
    # the second joiner waited in the queue while the first synced, then synced itself
    assert phases[second][0] == ClientPhase.Queued and len(phases[second]) >= 2
    assert any(t.startswith("[SYNC] Synchronising weights") for t in logs_of(sim, second))
    out = logs_of(sim, first)
    for line in ("[SYNC] Synchronising weights with peers. Node won't process batches in this "
                 "phase.", "[SYNC] Synchronising optimizer state. Node is now processing "
                 "batches, but doesn't contribute to weight averaging yet.",
                 "[SYNC] Sync complete. Node is now fully contributing to training."):
        assert line in out
    assert any(t.startswith("[SYNC] This phase will last 2 steps") for t in out)
    # it replayed from the run seed's model (no snapshot recorded): every set from step 1
    assert sim.bases[0] == (first, 1)
    synced = [a for who, op, a in sim.sent_args if who == first and op == "synced"]
    accepted = [a for a in synced if (first, "synced", "SyncHashMismatch") not in sim.rejected]
    assert accepted and accepted[-1]["param_hash"] == sim_params(accepted[-1]["step"])
    assert [r for r in sim.rejected if r[1] not in ("tick", "synced")] == []
    # its results while warming up were witnessed, never applied; once Active they are
    warm = sim.state.clients[sim.state.client_index(sim.ids[first].public)].since
    trainer = sim.ids[first].public
    for k in range(3):
        for st, commits in applied_by(sim, k).items():
            held = sim.sms[k].sync.sets[st].results
            if any(r.trainer == trainer for r in held):
                assert st >= warm
    # the joiner applies the same sets as the incumbents from its sync on
    mine, theirs = applied_by(sim, first), applied_by(sim, 0)
    common = set(mine) & set(theirs)
    assert len(common) >= 3 and all(mine[s] == theirs[s] for s in common)


def test_a_lagging_client_goes_back_to_syncing_and_recovers():
    """Client 2's apply of step 5 goes wrong: its witness commits another hash, so it goes back
    to syncing (the coordinator sees it, the client sends resync), replays from a base to the
    quorum's hash, warms up and is Active again, without a restart."""
    sim = Sim(4, config=replace(SYNC, init_min_clients=4), wrong={(2, 5)})
    phases = []

    def until(s):
        p = phase_of(sim, 2)
        if p is not None and (not phases or phases[-1] != p):
            phases.append(p)
        return len(phases) > 1 and p == ClientPhase.Active
    end = sim.run(until)
    assert end.epoch == 0
    assert phases == [ClientPhase.Active, ClientPhase.Syncing, ClientPhase.WarmingUp,
                      ClientPhase.Active]
    out = logs_of(sim, 2)
    assert any("lagging" in t for t in out)
    assert any(who == 2 for who, _ in sim.bases)  # it replayed from a base
    assert sim.sms[2].sync.line.hash_training(end.param_step) in (None, end.param_hash)


def test_a_result_trained_while_the_model_went_back_to_its_base_is_dropped():
    """A Train still running when the client turns out to lag (ResetToBase: the model goes
    back to its base and replays) did not train from its step's parameters: its result is not
    published (verifiers would judge it against the right parameters and find it bad; the
    coordinator excuses a lagging client's batch). Seen in benchmarks/byzantine's lying
    witnesses, whose deferred trains ran on their reset models and scored -6 and -8."""
    sim = Sim(3, config=SYNC)
    st = sim.run(lambda s: s.run_state.active and s.step >= 5)
    sm, me = sim.sms[0], 0
    step = st.step + 1  # a step it has not trained yet
    batch = next(iter(sm.assignments[st.step].values()))
    result = TrainingResult.create(sim.ids[me], step, batch, dummy_payload("sim", step, batch))
    sm.training_on[step] = sm.sync.line  # its Train starts ...
    sm.sync._back_to_base()  # ... and the client goes back to its base before it is done
    acts = sm.trained(step, result)
    assert not any(isinstance(a, Publish) for a in acts)
    assert any(isinstance(a, Log) and "dropped this client's result" in a.text for a in acts)
    assert step not in sm.results
    # a result whose Train started on the line the model follows now is published
    sm.training_on[step] = sm.sync.line
    assert any(isinstance(a, Publish) for a in sm.trained(step, result))


def test_a_joiner_waits_for_the_next_snapshot_when_no_peer_holds_a_step():
    """Peers keep only kept_rounds steps: a joiner whose base is older cannot replay, says so,
    and loads the next recorded snapshot, from which it syncs."""
    config = replace(SYNC, checkpoint_interval=4, kept_rounds=4)
    sim = Sim(3, config=config)
    sim.run(lambda s: s.run_state.active and s.step >= 10)
    joiner = sim.add_client()
    sim.run(lambda s: any("no peer holds step" in t for t in logs_of(sim, joiner)))
    assert "[SYNC] no peer holds step 1: waiting for the next snapshot" in logs_of(sim, joiner)
    for sm in sim.sms[:3]:  # the checkpointers can write to the store from now on
        sm.checkpointing.can_store = True
    sim.run(lambda s: phase_of(sim, joiner) == ClientPhase.WarmingUp)
    steps = [step for who, step in sim.bases if who == joiner]
    assert steps[0] == 1 and steps[-1] > 1 and steps[-1] % 4 in (0, 3)


def test_a_peer_whose_sets_replay_to_another_hash_is_skipped():
    """The first peer asked serves sets with a result left out: for rounds still in the state
    the witnesses' blooms show it, for older ones the replayed hash differs from the agreed
    one; the joiner skips that peer, replays from its base with the others' sets, and syncs."""
    sim = Sim(3, config=SYNC, chained=True, liar=0)
    sim.run(lambda s: s.run_state.active and s.step >= 10)
    joiner = sim.add_client()
    sim.run(lambda s: phase_of(sim, joiner) == ClientPhase.Active)
    out = logs_of(sim, joiner)
    assert any("skipping the sets of 0" in t for t in out), out
    assert [who for who, _ in sim.bases].count(joiner) >= 2  # replayed from its base again
    assert sim.hashes[joiner] == sim.hashes[1]  # in step with the run
    mine, theirs = applied_by(sim, joiner), applied_by(sim, 1)
    assert all(mine[s] == theirs[s] for s in mine)


def test_consensus_skips_the_results_of_warming_trainers():
    sim = Sim(4)
    sim.run(lambda s: s.run_state.active and s.current_round.height >= 3)
    sm, st = sim.sms[0], sim.state
    trained, witnessed = st.round_back(2), st.round_back(1)
    step = st.round_step(trained)
    assigned, got = sm.assignments[step], sm.results[step]
    everyone, _ = round_consensus(st, witnessed, assigned, got)
    idx = next(iter(assigned))
    skipped, missing = round_consensus(st, witnessed, assigned, got, warming=1 << idx)
    assert len(skipped) == len(everyone) - 1 and not missing
    assert assigned[idx] not in {r.batch for r in skipped}


def test_model_line_hashes():
    line = ModelLine(10, b"b" * 32, "snapshot")
    assert line.cursor == 9 and line.hash_training(10) == b"b" * 32
    assert line.hash_training(9) is None and line.hash_training(11) is None
    assert line.advance(AppliedSet(9, False, ())) is False
    assert line.hash_training(11) == b"b" * 32
    assert line.advance(AppliedSet(10, True, ())) is True
    assert line.hash_training(12) is None  # its Apply has not reported
    line.reported(10, b"c" * 32)
    assert line.hash_training(12) == b"c" * 32 and line.hash_training(11) == b"b" * 32
    epoch = ModelLine(20, b"e" * 32, "epoch")
    assert epoch.cursor == 20 and epoch.hash_training(20) == b"e" * 32


def test_model_line_knows_which_step_its_parameters_train():
    """What a verifier checks before judging a result of `step` (the model must hold the
    parameters its trainer trained from): an epoch's base trains its first two steps (the
    rounds before it drained), a snapshot's only its step; an applied set moves it on one."""
    epoch = ModelLine(20, b"e" * 32, "epoch")
    assert [s for s in range(18, 24) if epoch.trains(s)] == [20, 21]
    epoch.advance(AppliedSet(20, True, ()))
    assert [s for s in range(18, 24) if epoch.trains(s)] == [22]  # 20's set is applied
    snap = ModelLine(10, b"b" * 32, "snapshot")
    assert [s for s in range(7, 13) if snap.trains(s)] == [10]
    snap.advance(AppliedSet(9, False, ()))  # a round that applied nothing moves nothing
    assert [s for s in range(7, 13) if snap.trains(s)] == [10, 11]
    snap.advance(AppliedSet(10, True, ()))
    assert [s for s in range(7, 13) if snap.trains(s)] == [12]


def test_a_joiners_first_witness_vouches_for_the_round_it_joined_in():
    """A synced joiner elected witness in its first round must vouch for the round before it,
    whose results were sent before it joined: it asks its peers for them. Otherwise, with two
    witnesses, its bloom leaves every incumbent below the quorum and health checks drop them
    all."""
    asked = 0
    for join_at in range(6, 14):
        sim = Sim(3, config=replace(SYNC, witness_nodes=2))
        sim.run(lambda s: s.run_state.active and s.step >= join_at)
        joiner = sim.add_client()
        end = sim.run(lambda s: phase_of(sim, joiner) == ClientPhase.Active
                      and s.step >= join_at + 8)
        assert end.epoch == 0 and all(c.state == ClientState.Healthy for c in end.clients), \
            f"joined at step {join_at}: {[c.state.name for c in end.clients]}"
        asked += sum(1 for who, _, what in sim.fetches if who == joiner and what == "results")
    assert asked  # the case came up


def test_a_joiner_still_syncing_when_the_epoch_ends_is_active_in_the_next():
    sim = Sim(3, config=replace(SYNC, epoch_time=20, sync_warmup_rounds=8))
    sim.run(lambda s: s.run_state.active and s.step >= 14)
    joiner = sim.add_client()
    sim.run(lambda s: phase_of(sim, joiner) in (ClientPhase.Syncing, ClientPhase.WarmingUp))
    end = sim.run(lambda s: s.epoch == 1 and s.run_state.active and s.current_round.height >= 4)
    assert phase_of(sim, joiner) == ClientPhase.Active
    # the new epoch made it Active (it was warming up still): it says so once
    assert logs_of(sim, joiner).count(
        "[SYNC] Sync complete. Node is now fully contributing to training.") == 1
    mine, theirs = applied_by(sim, joiner), applied_by(sim, 0)
    later = [s for s in theirs if s >= end.start_step]
    assert later and all(mine.get(s) == theirs[s] for s in later)
