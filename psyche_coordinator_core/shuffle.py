"""Deterministic shuffles from a seed: a SHA-256-driven partial Fisher-Yates (committees) and an
LCG Fisher-Yates (trainer order). Both are integer-only so the Rust program reproduces them
exactly."""

import hashlib
from functools import lru_cache

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
def draw_first(seed: bytes, n: int, count: int) -> tuple:
    """The first `count` values of a Fisher-Yates shuffle of range(n), n <= 256: draw i swaps
    slot i with slot i + r_i % (n - i), where r_i is the (i % 4)-th little-endian u64 of
    sha256(seed || u32_le(i // 4)). Only the draws that are kept are made: electing c of n
    costs ceil(c / 4) hashes, which the program on Solana's VM can afford for 256 clients (a
    90-round swap-or-not election of 64 of 256 cost some 160,000 compute units)."""
    assert 0 <= count <= n <= 256
    slots = list(range(n))
    block = b""
    for i in range(count):
        if i % 4 == 0:
            block = sha256(seed, (i // 4).to_bytes(4, "little"))
        r = u64_le(block[8 * (i % 4):])
        j = i + r % (n - i)
        slots[i], slots[j] = slots[j], slots[i]
    return tuple(slots[:count])


@lru_cache(maxsize=1024)
def drawn_set(seed: bytes, n: int, count: int) -> frozenset:
    """`draw_first` as a set, for membership tests."""
    return frozenset(draw_first(seed, n, count))


def lcg_shuffle(items: list, seed: int) -> list:
    """Fisher-Yates driven by a 64-bit LCG: for i from len-1 down to 1, swap i with next % (i+1)."""
    out = list(items)
    state = seed & MASK64
    for i in range(len(out) - 1, 0, -1):
        state = (state * LCG_A + LCG_C) & MASK64
        j = state % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out
