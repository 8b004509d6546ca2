"""The server ticks when a phase is due, not up to a tick interval late, and never spins."""

import asyncio
import hashlib

from psyche_client.identity import Identity
from psyche_client.server.coordinator_server import CoordinatorServer
from psyche_coordinator_core import RunConfig, RunState, apply, new_run

CONFIG = RunConfig(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
                   epoch_time=15, total_steps=30, max_seq_len=16, min_clients=1,
                   init_min_clients=1, witness_nodes=0, global_batch_size_start=8,
                   global_batch_size_end=8, waiting_for_members_extra_time=1)


class Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def waiting_run(clock):
    """A run in WaitingForMembers with one joined client: due one second after the phase began."""
    state = apply(new_run("ticks", CONFIG, 7), 1000, "resume")
    me = Identity(hashlib.sha256(b"ticker").digest()).public
    state = apply(state, 1000, "join", signer=me, p2p_identity=me)
    assert state.run_state == RunState.WaitingForMembers and state.run_state_start == 1000
    return CoordinatorServer(state, clock=clock, tick_interval=0.5)


def test_waits_until_the_second_turns_then_the_interval():
    clock = Clock(1000.7)
    server = waiting_run(clock)
    assert abs(server.next_wait(False) - 0.302) < 1e-9  # due at 1001: tick just after
    clock.t = 1000.2
    assert server.next_wait(False) == 0.5  # further than the interval: the regular tick
    clock.t = 1001.002
    assert server.tick()  # the deadline passed: the run moves on
    assert server.state.run_state == RunState.Warmup


def test_a_due_tick_that_changes_nothing_does_not_spin():
    clock = Clock(1001.5)
    server = waiting_run(clock)
    assert server.next_wait(True) == 0.002  # just changed: look again at once
    assert server.next_wait(False) == 0.5  # due but unchanged: back to the interval


def test_tick_loop_moves_the_phase_at_its_deadline():
    interval = 20.0  # far from the deadline, so that a loaded machine cannot blur the two

    async def go():
        import time
        start = time.time()
        clock = Clock(0)
        server = waiting_run(lambda: 1000 + (time.time() - start) + clock.t)
        server.tick_interval = interval
        clock.t = 0.9  # 100 ms before the deadline
        loop = asyncio.ensure_future(server._tick_loop())
        try:
            await asyncio.wait_for(server._changed.wait(), 2 * interval)
        finally:
            loop.cancel()
        return time.time() - start, server.state.run_state

    took, phase = asyncio.run(go())
    assert phase == RunState.Warmup
    assert took < interval / 2  # at the deadline (0.1 s), not at the regular interval
