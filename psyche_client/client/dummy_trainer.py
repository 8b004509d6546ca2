"""Simulated training (`--dummy-training-delay-secs`): wait, then produce the batch's
deterministic result, so the whole coordination loop runs without a model. Same interface as
training.trainer.DistroTrainer; the daemon calls it from its worker thread."""

import hashlib
import time

from .results import dummy_payload


class DummyTrainer:
    def __init__(self, run_id: str, delay: float = 1.0):
        self.run_id, self.delay = run_id, delay

    def _params(self, step: int) -> str:
        # a stand-in parameter hash every simulated client shares: the step the parameters train
        return hashlib.sha256(f"dummy-params/{self.run_id}/{step}".encode()).hexdigest()

    def prepare(self, epoch: int, state, fetch_snapshot=None) -> str:
        # simulated results need no model, so neither does joining a run in progress
        return self._params(state.step)

    def train(self, step: int, batch, state) -> bytes:
        time.sleep(self.delay)
        return dummy_payload(self.run_id, step, batch)

    def apply(self, step: int, results: list) -> str:
        return self._params(step + 2)  # the parameters that train step + 2

    def evaluate(self, epoch: int, step: int):
        return None

    def snapshot(self, step: int, encode: bool = True):
        return None
