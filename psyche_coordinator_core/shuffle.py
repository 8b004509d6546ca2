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


@lru_cache(maxsize=1024)
def _swap_or_not_tables(seed: bytes, n: int) -> tuple:
    """Per round r: pivot = u64_le(sha256(seed||r)) % n and the bit source
    sha256(seed||r||u32_le(pos//256)); with n <= 256, pos//256 is always 0."""
    assert 0 < n <= 256
    pivots, sources = [], []
    for r in range(SHUFFLE_ROUND_COUNT):
        rb = bytes([r])
        pivots.append(u64_le(sha256(seed, rb)) % n)
        sources.append(sha256(seed, rb, (0).to_bytes(4, "little")))
    return tuple(pivots), tuple(sources)


def swap_or_not_index(seed: bytes, n: int, idx: int) -> int:
    """Shuffled position of one index: in each of 90 rounds, idx is paired with
    flip = (pivot + n - idx) % n and moves there when bit max(idx, flip) of the source is set."""
    pivots, sources = _swap_or_not_tables(seed, n)
    for pivot, source in zip(pivots, sources):
        flip = (pivot + n - idx) % n
        pos = max(idx, flip)
        if (source[(pos % 256) // 8] >> (pos % 8)) & 1:
            idx = flip
    return idx


@lru_cache(maxsize=1024)
def swap_or_not_permutation(seed: bytes, n: int) -> tuple:
    """perm[i] = shuffled position of index i, for i in range(n), n <= 256."""
    return tuple(swap_or_not_index(seed, n, i) for i in range(n))


def lcg_shuffle(items: list, seed: int) -> list:
    """Fisher-Yates driven by a 64-bit LCG: for i from len-1 down to 1, swap i with next % (i+1)."""
    out = list(items)
    state = seed & MASK64
    for i in range(len(out) - 1, 0, -1):
        state = (state * LCG_A + LCG_C) & MASK64
        j = state % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out
