"""The client's withdraw on exit, in process: bounded, never raising, and the signals that ask
for it (the processes themselves: tests/integration/test_withdraw_on_exit.py and
tests/chain/test_chain_withdraw_on_exit.py)."""

import asyncio
import logging
import os
import signal

import pytest

from psyche_client.backends.base import BackendError
from psyche_client.client.leaving import RunIsFull, install_exit_signals, withdraw
from psyche_coordinator_core import CoordinatorError

ME = bytes(range(32))


@pytest.fixture
def logged():
    """The lines the leaving module logs (held here: a CLI run in this process may have
    stopped the package's records from reaching the root logger)."""
    lines = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("psyche_client.client.leaving")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(old)


class Backend:
    def __init__(self, outcome=None, delay=0.0):
        self.outcome, self.delay, self.sent = outcome, delay, []

    async def send(self, op, args):
        self.sent.append((op, args))
        await asyncio.sleep(self.delay)
        if self.outcome is not None:
            raise self.outcome


def test_withdraw_sends_the_op_for_this_signer():
    backend = Backend()
    assert asyncio.run(withdraw(backend, ME)) is True
    assert backend.sent == [("withdraw", {"signer": ME})]


@pytest.mark.parametrize("outcome", [CoordinatorError("InvalidWithdraw", "not a member"),
                                     BackendError("connection lost")])
def test_a_refused_or_undelivered_withdraw_is_logged_not_raised(outcome, logged):
    assert asyncio.run(withdraw(Backend(outcome), ME)) is False
    assert any(str(outcome) in line for line in logged), logged


def test_a_withdraw_that_hangs_is_given_up_after_the_timeout(logged):
    assert asyncio.run(withdraw(Backend(delay=60), ME, timeout=0.1)) is False
    assert any("not confirmed within" in line for line in logged), logged


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_first_exit_signal_asks_to_leave_a_second_is_not_caught(sig):
    asked = []

    async def go():
        loop = asyncio.get_running_loop()
        left = loop.create_future()
        install_exit_signals(lambda code: (asked.append(code), left.set_result(None)))
        os.kill(os.getpid(), sig)
        await asyncio.wait_for(left, 5)
        # both handlers are gone: a second signal gets Python's own behaviour
        return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    old = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        after_int, after_term = asyncio.run(go())
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])
    assert asked == [128 + sig]
    assert after_int is signal.default_int_handler and after_term == signal.SIG_DFL


def test_run_is_full_in_plain_words():
    assert str(RunIsFull(8)) == "the run is full: 8 of 8 clients; try again later"
