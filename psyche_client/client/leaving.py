"""Leaving a run: the withdraw a client sends when it exits on purpose, the signals that ask for
it, and the refusal of a full run.

On a chain nothing sees a process end: a client that exits without `withdraw` stays a Healthy
client of its epoch (the others wait on it until the health checks drop it) and its join for
the next epoch stays in `pending`. The centralized server withdraws a dropped connection, but
the client withdraws itself there too, so both backends behave alike."""

import asyncio
import logging
import signal

from psyche_coordinator_core import CoordinatorError

from ..backends.base import BackendError

log = logging.getLogger(__name__)

# Seconds the withdraw may take before the client exits anyway: a confirmed transaction on a
# local chain takes well under one; supervisors commonly kill 10 s after SIGTERM.
WITHDRAW_TIMEOUT = 8.0
EXIT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunIsFull(Exception):
    """The coordinator refused the join with RunFull: the run has `max_clients` members. There
    is no waiting list, so the client says so and exits instead of asking again."""

    def __init__(self, max_clients: int):
        super().__init__(f"the run is full: {max_clients} of {max_clients} clients; "
                         "try again later")
        self.max_clients = max_clients


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + its number."""
    return 128 + int(signum)


async def withdraw(backend, signer: bytes, timeout: float = WITHDRAW_TIMEOUT) -> bool:
    """Send `withdraw` for `signer` and wait at most `timeout` s. A failure is logged, never
    raised: the client is exiting either way. True when the coordinator accepted it."""
    try:
        await asyncio.wait_for(backend.send("withdraw", {"signer": signer}), timeout)
    except CoordinatorError as e:
        # InvalidWithdraw: not a member (never joined, or already dropped): nothing to leave
        log.info("withdraw not needed: %s", e)
        return False
    except asyncio.TimeoutError:
        log.warning("withdraw not confirmed within %.0f s; exiting anyway", timeout)
        return False
    except BackendError as e:
        log.warning("withdraw not delivered: %s", e)
        return False
    log.info("withdrew from the run")
    return True


def install_exit_signals(leave) -> None:
    """On the first SIGINT or SIGTERM call `leave(exit_code)` (the daemon withdraws, then
    exits); a second one acts as if nothing were installed (SIGINT: KeyboardInterrupt, SIGTERM:
    killed), for a withdraw that someone does not want to wait for. Call it inside the event
    loop."""
    loop = asyncio.get_running_loop()

    def on_signal(signum):
        for sig in EXIT_SIGNALS:
            loop.remove_signal_handler(sig)
        log.info("%s: withdrawing from the run before exiting", signal.Signals(signum).name)
        leave(exit_code(signum))

    for sig in EXIT_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
