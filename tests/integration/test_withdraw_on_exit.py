"""A client told to exit (SIGINT, as Ctrl-C sends) withdraws through its backend before it goes,
on the centralized server too. The server runs with --withdraw-on-disconnect false, so only the
client's own withdraw can make its entry Withdrawn and take its join out of `pending`."""

import signal

import pytest

from psyche_coordinator_core import ClientState, RunState

from .harness import Cluster, Observer, write_state

pytestmark = pytest.mark.slow


def test_a_client_sent_sigint_withdraws_on_the_centralized_server(tmp_path):
    c = Cluster(tmp_path, write_state(tmp_path, run_id="withdraw-exit"),
                ["--withdraw-on-disconnect", "false"])
    try:
        c.start_server()
        for n in (1, 2, 3):
            c.start_client(n)
        obs = Observer(c.port, c.run_id)
        leaver = c.signer(1)
        obs.wait(lambda s: (
            s.run_state == RunState.RoundTrain
            and any(x.signer == leaver and x.state == ClientState.Healthy for x in s.clients)
            and s.pending_index(leaver) is not None), 120, "client 1 training and pending")
        c.clients[1].kill(signal.SIGINT)
        after = obs.wait(lambda s: True, 10, "the state")
    finally:
        c.stop()
        print(c.dump())  # shown by pytest only when the test fails

    (entry,) = [x for x in after.clients if x.signer == leaver]
    assert entry.state == ClientState.Withdrawn, entry
    assert after.pending_index(leaver) is None
    assert "withdrew from the run" in c.clients[1].output()
    assert c.clients[1].p.returncode == 128 + signal.SIGINT
