"""The client state machine's settle duty (docs/points.md): once no round can end, its own
slot at once, the others' (clients that left or died) after its tick jitter; sent once per
slot's counts, again when undelivered; joins as the identity it acts for."""

import hashlib
from dataclasses import replace

from psyche_client.client.actions import Send
from psyche_client.client.state_machine import ClientStateMachine
from psyche_coordinator_core import Client, RunConfig, RunState, apply, new_run

CONFIG = RunConfig(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
                   epoch_time=15, total_steps=30, max_seq_len=16, min_clients=2,
                   init_min_clients=3, witness_nodes=0, global_batch_size_start=8,
                   global_batch_size_end=8, waiting_for_members_extra_time=1)
ME, OTHER, GONE, BOSS = (hashlib.sha256(b"settle-%d" % n).digest() for n in range(4))
T0 = 1000


def state(run_state, counts, epoch=1, start=T0):
    s = apply(new_run("settle", CONFIG, 5), T0, "resume")
    s.clients = [Client(sig, sig, presence=p, sequences=q)
                 for sig, (p, q) in zip((ME, OTHER, GONE), counts)]
    s.run_state, s.run_state_start, s.epoch = run_state, start, epoch
    return s


def settles(actions):
    return sorted(a.args["index"] for a in actions if isinstance(a, Send) and a.op == "settle")


def test_own_slot_at_once_others_after_the_jitter_each_once():
    sm = ClientStateMachine(ME, ME, tick_jitter=1.5)
    assert settles(sm.on_state(state(RunState.RoundTrain, [(3, 1)] * 3), T0)) == []
    cooldown = state(RunState.Cooldown, [(3, 1), (3, 1), (2, 0)])
    assert settles(sm.on_state(cooldown, T0)) == [0]  # its own, at once
    assert settles(sm.on_timer(T0 + 2.4)) == []  # start + 1 + jitter not reached
    assert settles(sm.on_timer(T0 + 2.5)) == [1, 2]  # then the others' (left, died)
    assert settles(sm.on_timer(T0 + 5)) == []  # each once
    # a settle that never reached the server is sent again
    sm.op_finished("settle", "Unreachable", {"index": 1})
    assert settles(sm.on_timer(T0 + 6)) == [1]
    # a refusal (someone else settled it first) is not retried
    sm.op_finished("settle", "NothingToSettle", {"index": 2})
    assert settles(sm.on_timer(T0 + 7)) == []


def test_settled_slots_are_not_settled_again_when_the_epoch_number_moves():
    """The last epoch's Cooldown and the Finished after it have different epoch numbers: the
    slots' points are the same, and settled once."""
    sm = ClientStateMachine(ME, ME)
    assert settles(sm.on_state(state(RunState.Cooldown, [(3, 1)] * 3, epoch=1), T0)) == [0]
    finished = state(RunState.Finished, [(3, 1)] * 3, epoch=2, start=T0 + 1)
    assert settles(sm.on_state(finished, T0 + 1)) == []
    assert settles(sm.on_timer(T0 + 2)) == [1, 2]


def test_the_same_counts_in_a_later_epoch_are_settled_again():
    sm = ClientStateMachine(ME, ME)
    assert settles(sm.on_state(state(RunState.Cooldown, [(4, 0), (0, 0), (0, 0)]), T0)) == [0]
    sm.on_state(state(RunState.Cooldown, [(0, 0)] * 3), T0)  # settled
    sm.on_state(state(RunState.RoundTrain, [(2, 0)] * 3, epoch=2), T0 + 10)
    later = state(RunState.WaitingForMembers, [(4, 0), (0, 0), (0, 0)], epoch=2, start=T0 + 20)
    assert settles(sm.on_state(later, T0 + 20)) == [0]


def test_joins_as_the_identity_it_acts_for():
    s = apply(new_run("settle", CONFIG, 5), T0, "resume")
    join = [a for a in ClientStateMachine(ME, ME, identity=BOSS).on_state(s, T0)
            if isinstance(a, Send) and a.op == "join"]
    assert join and join[0].args["identity"] == BOSS
    own = [a for a in ClientStateMachine(ME, ME).on_state(replace(s), T0)
           if isinstance(a, Send) and a.op == "join"]
    assert own and "identity" not in own[0].args
