"""The warmup drop with real processes: a client SIGKILLed during Warmup, before its warmup
witness, is Dropped when Warmup times out (`warmup_time`) and is no participant of the epoch's
first round; the two others train. The server keeps a dropped connection's client
(--withdraw-on-disconnect false), as a chain does: nothing there sees a process end, so only the
coordinator's rule can take the dead client out. Without the rule it stayed Healthy and became
a participant of the first round.

The victim joins first and is then stopped (SIGSTOP) while the run waits for members, so that
it certainly sends no warmup witness (simulated training loads no model: a running client
sends its witness at once); it is killed once Warmup has begun."""

import signal

import pytest

from psyche_coordinator_core import ClientState, RunState

from .harness import Cluster, Observer, write_state

pytestmark = pytest.mark.slow
VICTIM = 3


def test_a_client_killed_in_warmup_is_dropped_at_warmup_time(tmp_path):
    # warmup_time: room for the kill after Warmup is seen, before the timeout
    c = Cluster(tmp_path, write_state(tmp_path, run_id="warmup-drop", warmup_time=5),
                ["--withdraw-on-disconnect", "false"])
    try:
        c.start_server()
        obs = Observer(c.port, c.run_id)
        victim = c.start_client(VICTIM)
        gone = c.signer(VICTIM)
        obs.wait(lambda s: s.pending_index(gone) is not None, 60, "the victim to join")
        victim.p.send_signal(signal.SIGSTOP)
        for n in (1, 2):
            c.start_client(n)
        warmup = obs.wait(lambda s: s.run_state == RunState.Warmup, 120, "Warmup")
        victim.kill(signal.SIGKILL)
        first = obs.wait(lambda s: s.run_state == RunState.RoundTrain, 60, "the first round")
        i = warmup.client_index(gone)
        assert i is not None and warmup.clients[i].state == ClientState.Healthy  # in the epoch
        assert first.epoch == warmup.epoch and first.current_round.height == 0
        assert first.clients[i].state == ClientState.Dropped, first.clients[i]
        assert i not in first.current_round.participant_indices()
        others = sorted(first.client_index(c.signer(n)) for n in (1, 2))
        assert first.current_round.participant_indices() == others
        later = obs.wait(lambda s: s.run_state == RunState.RoundTrain
                         and s.step >= first.step + 2, 120, "two rounds later")
    finally:
        c.stop()
        print(c.dump())  # shown by pytest only when the test fails

    assert later.epoch == first.epoch
    assert later.current_round.participant_indices() == others
    for n in (1, 2):  # the others trained
        assert "trained step" in c.clients[n].output(), c.clients[n].output()
