"""Hypothesis strategies shared by the fuzz tests: structured mutations of a valid encoding
(bit flips, truncations, extensions, spliced bytes, overwritten length fields with huge values)
and random bytes; FUZZ, the settings every fuzz test uses (bounded, derandomized: the same
examples on every run, so a failure reproduces and the run time is stable)."""

import struct

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = dict(derandomize=True, deadline=2000, database=None, print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
fuzz = settings(max_examples=150, **FUZZ)
HUGE = [0, 1, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 1 << 31, 1 << 40]


def _flip(data: bytes, pos: int, bit: int) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    b[pos % len(b)] ^= 1 << bit
    return bytes(b)


def _huge(data: bytes, pos: int, value: int, width: int, order: str) -> bytes:
    """Overwrite `width` bytes at `pos` with `value` (a length or count field made huge)."""
    if len(data) < width:
        return data
    pos %= len(data) - width + 1
    raw = (value & ((1 << (8 * width)) - 1)).to_bytes(width, order)
    return data[:pos] + raw + data[pos + width:]


def _truncate(data: bytes, p: int) -> bytes:
    return data[:p % (len(data) + 1)]


def _extend(data: bytes, extra: bytes) -> bytes:
    return data + extra


def _insert(data: bytes, p: int, junk: bytes) -> bytes:
    p %= len(data) + 1
    return data[:p] + junk + data[p:]


def _cut(data: bytes, p: int, q: int) -> bytes:
    p, q = sorted((p % (len(data) + 1), q % (len(data) + 1)))
    return data[:p] + data[q:]


def mutations():
    """A strategy of functions bytes -> bytes: one structured mutation each."""
    pos = st.integers(0, 1 << 16)
    return st.one_of(
        st.builds(lambda p, b: lambda d: _flip(d, p, b), pos, st.integers(0, 7)),
        st.builds(lambda p: lambda d: _truncate(d, p), pos),
        st.builds(lambda e: lambda d: _extend(d, e), st.binary(min_size=1, max_size=64)),
        st.builds(lambda p, j: lambda d: _insert(d, p, j), pos, st.binary(max_size=16)),
        st.builds(lambda p, q: lambda d: _cut(d, p, q), pos, pos),
        st.builds(lambda p, v, w, o: lambda d: _huge(d, p, v, w, o), pos, st.sampled_from(HUGE),
                  st.sampled_from([1, 2, 4, 8]), st.sampled_from(["little", "big"])),
        st.builds(lambda r: lambda d: r, st.binary(max_size=256)),  # random bytes instead
    )


def mutated(valid: bytes):
    """A strategy of byte strings near `valid`."""
    return mutations().map(lambda f: f(valid))


def mutated_text(valid: str):
    """Texts near `valid`: its UTF-8 mutated, read back (bad UTF-8 replaced)."""
    return mutated(valid.encode()).map(lambda b: b.decode("utf-8", "replace"))


def json_values(max_leaves: int = 12):
    """Arbitrary JSON values, edge numbers and strings included."""
    scalars = st.one_of(
        st.none(), st.booleans(),
        st.integers(-(1 << 70), 1 << 70), st.sampled_from([0, -1, 1 << 32, 1 << 64, -(1 << 63)]),
        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([-0.0, 1.0, 1e3]),
        st.text(max_size=20), st.sampled_from(["", "\0", "ab" * 32, "é", "\U0001f600"]),
    )
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
        max_leaves=max_leaves)


def u32(v: int) -> bytes:
    return struct.pack("<I", v)
