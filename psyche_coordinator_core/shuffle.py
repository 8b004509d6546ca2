"""Deterministic permutations from a seed: swap-or-not (committees) and an LCG Fisher-Yates
(trainer order). Both are integer-only so the Rust program reproduces them exactly."""

import hashlib
from functools import lru_cache

from .constants import SHUFFLE_ROUND_COUNT

MASK64 = (1 << 64) - 1
LCG_A = 6364136223846793005
LCG_C = 1442695040888963407


def sha256(*parts: bytes) -> bytes:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()


def u64_le(b: bytes) -> int:
    return int.from_bytes(b[:8], "little")


@lru_cache(maxsize=4096)
def swap_or_not_permutation(seed: bytes, n: int) -> tuple:
    """perm[i] = shuffled position of index i, for i in range(n), n <= 256.

    Swap-or-not: for each of 90 rounds r, pivot = u64_le(sha256(seed||r)) % n; an index idx is
    paired with flip = (pivot + n - idx) % n and swapped when bit max(idx, flip) of
    sha256(seed||r||u32_le(max//256)) is set. With n <= 256 that second hash is one per round."""
    assert 0 < n <= 256
    pivots, sources = [], []
    for r in range(SHUFFLE_ROUND_COUNT):
        rb = bytes([r])
        pivots.append(u64_le(sha256(seed, rb)) % n)
        sources.append(sha256(seed, rb, (0).to_bytes(4, "little")))
    perm = []
    for idx in range(n):
        for r in range(SHUFFLE_ROUND_COUNT):
            flip = (pivots[r] + n - idx) % n
            pos = max(idx, flip)
            if (sources[r][(pos % 256) // 8] >> (pos % 8)) & 1:
                idx = flip
        perm.append(idx)
    return tuple(perm)


def lcg_shuffle(items: list, seed: int) -> list:
    """Fisher-Yates driven by a 64-bit LCG: for i from len-1 down to 1, swap i with next % (i+1)."""
    out = list(items)
    state = seed & MASK64
    for i in range(len(out) - 1, 0, -1):
        state = (state * LCG_A + LCG_C) & MASK64
        j = state % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out
