"""Witness bloom filters: false-positive rate at 256 participants, no false negatives, the bit
layout documented in bloom.py (recomputed here independently of pybloom-live, as the Rust port
will), and rejection of malformed bloom bytes."""

import hashlib
import random

import pytest

from psyche_coordinator_core import CoordinatorError, WitnessBloom, bloom_contains, bloom_of
from psyche_coordinator_core.bloom import EMPTY_BLOOM, check_bloom_bytes
from psyche_coordinator_core.constants import (BLOOM_BITS, BLOOM_BITS_PER_SLICE, BLOOM_BYTES,
                                               BLOOM_SLICES)

PARTICIPANTS = 256
QUERIES = 100_000


def random_keys(rng: random.Random, n: int) -> list:
    return [rng.randbytes(32).hex() for _ in range(n)]


# ---------------------------------------------------------------- independent reimplementation

def bit_positions(key_hex: str) -> list:
    """From the bloom.py docstring alone: h = SHA-256(SHA-256(u32_le(0)) || utf8(k)); the first 11
    little-endian u16 words of h, each mod 369, give one bit per slice; slice s owns bits
    [369*s, 369*(s+1))."""
    h = hashlib.sha256(hashlib.sha256((0).to_bytes(4, "little")).digest() + key_hex.encode())
    d = h.digest()
    return [s * 369 + int.from_bytes(d[2 * s:2 * s + 2], "little") % 369 for s in range(11)]


def layout_bytes(keys) -> bytes:
    """Bit i lives in byte i // 8 at bit i % 8 (least significant first); 4059 bits in 508 bytes."""
    out = bytearray(508)
    for k in keys:
        for i in bit_positions(k):
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def test_constants_match_the_documented_layout():
    assert (BLOOM_SLICES, BLOOM_BITS_PER_SLICE, BLOOM_BITS, BLOOM_BYTES) == (11, 369, 4059, 508)
    assert EMPTY_BLOOM == bytes(508)


# ---------------------------------------------------------------- false positives / negatives

def test_false_positive_rate_with_256_participants():
    rng = random.Random(20240601)
    inserted = random_keys(rng, PARTICIPANTS)
    bloom = WitnessBloom()
    for k in inserted:
        bloom.add(k)
    members = set(inserted)
    queries = [k for k in random_keys(rng, QUERIES + 10) if k not in members][:QUERIES]
    assert len(queries) == QUERIES
    false_positives = sum(1 for k in queries if k in bloom)
    rate = false_positives / QUERIES
    print(f"bloom false-positive rate at {PARTICIPANTS} items: {rate:.4%} "
          f"({false_positives}/{QUERIES})")
    assert rate <= 0.01
    # the design point is ~0.05% ((1 - e^(-256/369))^11 = 0.049%); 0.2% would mean a broken hash
    assert rate <= 0.002


def test_no_false_negatives():
    rng = random.Random(99)
    for n in (1, 17, 256):
        keys = random_keys(rng, n)
        data = bloom_of(keys)
        reloaded = WitnessBloom(data)
        assert all(k in reloaded for k in keys)
        assert all(bloom_contains(data, k) for k in keys[:20])


def test_empty_bloom_contains_nothing():
    rng = random.Random(5)
    assert not any(bloom_contains(EMPTY_BLOOM, k) for k in random_keys(rng, 100))


# ---------------------------------------------------------------- bit layout

@pytest.mark.parametrize("n", [0, 1, 2, 31, 256])
def test_bloom_bytes_follow_the_documented_layout(n):
    rng = random.Random(1000 + n)
    keys = random_keys(rng, n)
    data = bloom_of(keys)
    assert len(data) == BLOOM_BYTES
    assert data == layout_bytes(keys)
    assert data[-1] >> 3 == 0  # padding bits 4059..4063 stay clear


def test_membership_follows_the_documented_layout():
    rng = random.Random(3)
    data = bloom_of(random_keys(rng, 256))
    for k in random_keys(rng, 2000):
        want = all((data[i // 8] >> (i % 8)) & 1 for i in bit_positions(k))
        assert bloom_contains(data, k) == want


def test_known_answer_for_the_rust_port():
    """Pinned values a port can check without any bloom library."""
    k = hashlib.sha256(b"psyche-vector/signer/0").hexdigest()
    assert k == "84685c3ef3d0083568d3c7fa72646c7125b8aac78c14f321da929faf595c4828"
    assert bit_positions(k) == [144, 421, 949, 1220, 1519, 1979, 2297, 2869, 3139, 3656, 3909]
    assert hashlib.sha256(bloom_of([k])).hexdigest() == (
        "6cf5081e829d5ad0df77a2e0d1c344e79c61be5b96da823e6fe8487410914fba")
    keys = [hashlib.sha256(b"psyche-vector/signer/%d" % i).hexdigest() for i in range(256)]
    assert hashlib.sha256(bloom_of(keys)).hexdigest() == (
        "8a43fe5d3db33d0f06cbe34a14c5b1f0d098d60f7dc9007d62aaec400c80f1bb")


def test_keys_are_lowercase_hex_strings():
    b = WitnessBloom()
    with pytest.raises(ValueError):
        b.add("AB" * 32)
    with pytest.raises(ValueError):
        b.add(b"\x00" * 32)


# ---------------------------------------------------------------- malformed bytes

@pytest.mark.parametrize("length", [0, 1, 507, 509, 512, 1016])
def test_wrong_length_is_malformed(length):
    with pytest.raises(CoordinatorError) as e:
        check_bloom_bytes(bytes(length))
    assert e.value.code == "MalformedBloom"
    with pytest.raises(CoordinatorError):
        WitnessBloom(bytes(length))


@pytest.mark.parametrize("bit", range(3, 8))
def test_padding_bits_set_is_malformed(bit):
    data = bytes(507) + bytes([1 << bit])
    with pytest.raises(CoordinatorError) as e:
        check_bloom_bytes(data)
    assert e.value.code == "MalformedBloom"
    with pytest.raises(CoordinatorError):
        bloom_contains(data, "00" * 32)


def test_last_real_bits_are_accepted():
    data = bytes(507) + b"\x07"  # bits 4056, 4057, 4058: the end of slice 10
    assert check_bloom_bytes(data) == data
    assert WitnessBloom(data).to_bytes() == data
    full = b"\xff" * 507 + b"\x07"
    assert WitnessBloom(full).to_bytes() == full
    assert bloom_contains(full, "12" * 32)


def test_not_bytes_is_malformed():
    for bad in ("00" * 508, None, [0] * 508):
        with pytest.raises(CoordinatorError) as e:
            check_bloom_bytes(bad)
        assert e.value.code == "MalformedBloom"
    assert check_bloom_bytes(bytearray(508)) == bytes(508)
