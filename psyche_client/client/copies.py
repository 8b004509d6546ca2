"""Copies and replays: a result whose payload is another result's (the same bytes, or the same
indices in nearly every sampled chunk), of this round or of the rounds just before it.

Only the later of two copies is refused: whoever copies a payload has received it first, so its
copy reaches a witness after the original (and a trainer that replays its own last payload is
caught by the older step). Fingerprints come from the validation (training/validation.py); a
simulated result has none and is compared by its bytes alone."""

import hashlib

import numpy as np

# the share of sampled chunks with the same indices that makes a result a copy ("near-total
# overlap"): honest results of different batches share 7% (tests/training/test_validation.py);
# a copy with its indices changed in more chunks than this leaves is verification's to judge
NEAR_COPY = 0.9
ROUNDS_BACK = 2  # replays of this many rounds back are caught; older ones fail verification


def overlap(a, b) -> float:
    """The share of sampled chunks whose indices are the same in both fingerprints."""
    if a is None or b is None or a.size == 0 or a.size != b.size:
        return 0.0
    return float(np.count_nonzero(a == b)) / a.size


class SeenPayloads:
    def __init__(self):
        self.by_step = {}  # step -> [(digest, fingerprint, trainer hex)]

    def copy_of(self, step: int, payload: bytes, fp) -> str:
        """'' when the payload is new, else what it copies."""
        digest = hashlib.sha256(payload).digest()
        for s in range(step, step - ROUNDS_BACK - 1, -1):
            for d, f, trainer in self.by_step.get(s, ()):
                what = "the payload" if d == digest else None
                if what is None and overlap(f, fp) >= NEAR_COPY:
                    what = "nearly the indices"
                if what:
                    when = "this step" if s == step else f"step {s}"
                    return f"{what} of {trainer[:8]}'s result for {when}"
        return ""

    def add(self, step: int, payload: bytes, fp, trainer: bytes) -> None:
        self.by_step.setdefault(step, []).append(
            (hashlib.sha256(payload).digest(), fp, trainer.hex()))

    def forget(self, before: int) -> None:
        for s in [s for s in self.by_step if s < before]:
            del self.by_step[s]
