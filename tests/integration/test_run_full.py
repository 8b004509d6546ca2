"""A join beyond the run's capacity (`max_clients`) is refused with RunFull; the client says so in
plain words and exits non-zero instead of asking again forever (there is no waiting list)."""

import pytest

from psyche_coordinator_core import ClientState, RunState

from .harness import Cluster, Observer, write_state

pytestmark = pytest.mark.slow


def test_a_client_joining_a_full_run_says_so_and_exits(tmp_path):
    state = write_state(tmp_path, run_id="run-full", max_clients=2, init_min_clients=2,
                        min_clients=2)
    c = Cluster(tmp_path, state)
    try:
        c.start_server()
        for n in (1, 2):
            c.start_client(n)
        Observer(c.port, c.run_id).wait(
            lambda s: s.run_state == RunState.RoundTrain
            and sum(x.state == ClientState.Healthy for x in s.clients) == 2, 120,
            "two clients training")
        late = c.start_client(3)
        code = late.p.wait(timeout=120)
    finally:
        c.stop()
        print(c.dump())  # shown by pytest only when the test fails

    assert code == 2, late.output()
    assert "error: the run is full: 2 of 2 clients; try again later" in late.output()
