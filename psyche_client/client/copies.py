"""Copies and replays: a result whose payload is another result's: the same bytes as any valid
result of the last DIGEST_ROUNDS rounds, or the same indices in nearly every sampled chunk as one
of this round or the two before.

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
NEAR_ROUNDS = 2  # fingerprints are compared with this step's and the two before
DIGEST_ROUNDS = 64  # exact copies are caught this many rounds back (32 bytes per result)


def overlap(a, b) -> float:
    """The share of sampled chunks whose indices are the same in both fingerprints."""
    if a is None or b is None or a.size == 0 or a.size != b.size:
        return 0.0
    return float(np.count_nonzero(a == b)) / a.size


class SeenPayloads:
    def __init__(self):
        self.digests = {}  # payload SHA-256 -> (step, trainer hex) of its first valid result
        self.prints = {}  # step -> [(fingerprint, trainer hex)]
        self.forgot_for = None  # the step the last forget was for: once per step is enough

    @staticmethod
    def _when(s: int, step: int) -> str:
        return "this step" if s == step else f"step {s}"

    def copy_of(self, step: int, payload: bytes, fp) -> str:
        """'' when the payload is new, else what it copies."""
        first = self.digests.get(hashlib.sha256(payload).digest())
        if first is not None:
            return f"the payload of {first[1][:8]}'s result for {self._when(first[0], step)}"
        for s in range(step, step - NEAR_ROUNDS - 1, -1):
            for f, trainer in self.prints.get(s, ()):
                if overlap(f, fp) >= NEAR_COPY:
                    return f"nearly the indices of {trainer[:8]}'s result for {self._when(s, step)}"
        return ""

    def add(self, step: int, payload: bytes, fp, trainer: bytes) -> None:
        self.digests.setdefault(hashlib.sha256(payload).digest(), (step, trainer.hex()))
        if fp is not None:
            self.prints.setdefault(step, []).append((fp, trainer.hex()))

    def forget(self, step: int) -> None:
        """Drop what is too old to compare with the results of `step`."""
        if step == self.forgot_for:
            return
        self.forgot_for = step
        self.digests = {d: v for d, v in self.digests.items() if v[0] > step - DIGEST_ROUNDS}
        for s in [s for s in self.prints if s < step - NEAR_ROUNDS]:
            del self.prints[s]
