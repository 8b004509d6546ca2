"""Every coordinator state a run broadcasts, recorded by a background thread from start to end
(Observer in harness.py connects only while a test waits, and misses what happens between its
waits: a SIGKILL and the withdrawal that follows, say)."""

import asyncio
import threading
import time

from psyche_client.backends.centralized import CentralizedBackend


class Recorder:
    def __init__(self, port, run_id):
        self.states = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._connected = threading.Event()
        self.error = None
        self._trigger = None  # (predicate, action) armed by arm()
        self.fired = None  # index of the state that fired the last armed action
        self._t = threading.Thread(target=lambda: asyncio.run(self._loop(port, run_id)),
                                   daemon=True)
        self._t.start()
        if not self._connected.wait(60):
            raise AssertionError(f"the recorder could not connect: {self.error!r}")

    async def _loop(self, port, run_id):
        backend = CentralizedBackend(f"ws://127.0.0.1:{port}", run_id, observer=True)
        try:
            await backend.connect()
            # keep every state, not only the newest: the test reads phases that last moments
            backend._states = asyncio.Queue()
            self._connected.set()
            while not self._stop.is_set():
                try:
                    st = await asyncio.wait_for(backend.next_state(), 1.0)
                except asyncio.TimeoutError:
                    continue
                with self._cond:
                    self.states.append(st)
                    self._fire(len(self.states) - 1)
                    self._cond.notify_all()
        except Exception as e:  # the server stopped: the waits report it
            self.error = e
        finally:
            self._connected.set()
            with self._cond:
                self._cond.notify_all()
            await backend.close()

    def _fire(self, k):
        if self._trigger is not None and self._trigger[0](self.states[k]):
            _, action = self._trigger
            self._trigger, self.fired = None, k
            action()

    def arm(self, predicate, action):
        """Run `action` (quick: a signal) in the recording thread as soon as a state
        satisfies `predicate`, the latest one now or a new one: a waiting test thread would
        react later, when a phase that lasts moments may be over."""
        with self._cond:
            self._trigger, self.fired = (predicate, action), None
            if self.states:
                self._fire(len(self.states) - 1)

    def wait_fired(self, timeout, what) -> int:
        """The index of the state that fired the armed action."""
        self.wait(lambda s: self.fired is not None, timeout, what, max(len(self.states) - 1, 0))
        return self.fired

    def wait(self, predicate, timeout, what, start=0):
        """The index and state of the first recorded state from `start` on that satisfies
        `predicate`; waits for new states up to `timeout` seconds."""
        end = time.time() + timeout
        k = start
        with self._cond:
            while True:
                while k < len(self.states):
                    if predicate(self.states[k]):
                        return k, self.states[k]
                    k += 1
                left = end - time.time()
                if left <= 0 or self.error is not None or not self._t.is_alive():
                    last = self.states[-1] if self.states else None
                    summary = (f"{last.run_state.name} epoch {last.epoch} step {last.step}"
                               if last else "no state")
                    raise AssertionError(f"timed out waiting for {what}; last state: "
                                         f"{summary}; recorder: {self.error!r}")
                self._cond.wait(min(left, 1.0))

    def stop(self):
        self._stop.set()
        self._t.join(10)
