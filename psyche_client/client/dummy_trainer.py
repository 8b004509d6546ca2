"""Simulated training (`--dummy-training-delay-secs`): wait, then produce the batch's
deterministic result, so the whole coordination loop runs without a model. Same interface as
training.trainer.DistroTrainer; the daemon calls it from its worker thread."""

import hashlib
import time

from psyche_coordinator_core import CheckpointKind

from ..training.errors import ModelUnavailable
from .results import dummy_payload


class DummyTrainer:
    def __init__(self, run_id: str, delay: float = 1.0):
        self.run_id, self.delay = run_id, delay
        self.base = None

    def _params(self, step: int) -> str:
        # a stand-in parameter hash every simulated client shares: the step the parameters train
        return hashlib.sha256(f"dummy-params/{self.run_id}/{step}".encode()).hexdigest()

    def prepare(self, epoch: int, state, fetch_snapshot=None) -> str:
        # simulated results need no model, so neither does joining a run in progress
        return self._params(state.step)

    def load_base(self, state):
        """A joiner's base: the recorded snapshot's step and hash (nothing to download: the
        simulated parameters are the step), else the run seed's, which trains step 1."""
        ck = state.checkpoint
        if any(ck.hash):
            self.base = (ck.step, ck.hash.hex())
        elif ck.kind == CheckpointKind.Dummy:
            self.base = (1, self._params(1))
        else:
            raise ModelUnavailable(f"no snapshot is recorded and the run is at step {state.step}"
                                   ": nothing to replay from")
        return self.base

    def reset_to_base(self):
        return self.base

    def train(self, step: int, batch, state) -> bytes:
        time.sleep(self.delay)
        return dummy_payload(self.run_id, step, batch)

    def validate(self, result) -> tuple:
        """Every honest simulated trainer of a batch sends the same bytes: anything else is
        refused (the daemon's validation, as for real results)."""
        if result.payload != dummy_payload(self.run_id, result.step, result.batch):
            return "not the batch's simulated result", None
        return "", None

    def verify(self, step: int, result, compare, previous=None, last=None) -> tuple:
        # a simulated result that passed validation is the batch's own: nothing more to judge
        return False, "simulated"

    def apply(self, step: int, results: list) -> str:
        return self._params(step + 2)  # the parameters that train step + 2

    def evaluate(self, epoch: int, step: int):
        return None

    def snapshot(self, step: int, encode: bool = True):
        return None
