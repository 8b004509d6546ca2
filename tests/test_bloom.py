"""Witness bloom filters: false-positive rate at 256 participants, no false negatives, the bit
layout documented in bloom.py (recomputed here independently of pybloom-live, as the Rust port
will), and rejection of malformed bloom bytes."""

import hashlib
import random

import pytest
import xxhash

from psyche_coordinator_core import CoordinatorError, WitnessBloom, bloom_contains, bloom_of
from psyche_coordinator_core.bloom import EMPTY_BLOOM, check_bloom_bytes
from psyche_coordinator_core.constants import (
    BLOOM_BITS,
    BLOOM_BITS_PER_SLICE,
    BLOOM_BYTES,
    BLOOM_SLICES,
)

PARTICIPANTS = 256
QUERIES = 100_000


def random_keys(rng: random.Random, n: int) -> list:
    return [rng.randbytes(32).hex() for _ in range(n)]


# ---------------------------------------------------------------- independent reimplementation

def bit_positions(key_hex: str) -> list:
    """From the bloom.py docstring alone: h = XXH3-128(XXH3-128(u32_le(0)) || utf8(k)) as
    big-endian digests; the 8 little-endian u16 words of h, each mod 353, give one bit per slice;
    slice s owns bits [353*s, 353*(s+1))."""
    salt = xxhash.xxh3_128((0).to_bytes(4, "little")).digest()
    d = xxhash.xxh3_128(salt + key_hex.encode()).digest()
    return [s * 353 + int.from_bytes(d[2 * s:2 * s + 2], "little") % 353 for s in range(8)]


def layout_bytes(keys) -> bytes:
    """Bit i lives in byte i // 8 at bit i % 8 (least significant first); 2824 bits in 353 bytes,
    then 3 zero bytes."""
    out = bytearray(356)
    for k in keys:
        for i in bit_positions(k):
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def test_constants_match_the_documented_layout():
    assert (BLOOM_SLICES, BLOOM_BITS_PER_SLICE, BLOOM_BITS, BLOOM_BYTES) == (8, 353, 2824, 356)
    assert EMPTY_BLOOM == bytes(356)


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
    # the design point is ~0.5% ((1 - e^(-256/353))^8 = 0.50%); 0.8% would mean a broken hash
    assert rate <= 0.008


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
    assert data[353:] == bytes(3)  # the padding bytes stay clear


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
    assert bit_positions(k) == [346, 407, 913, 1129, 1487, 1788, 2211, 2544]
    assert hashlib.sha256(bloom_of([k])).hexdigest() == (
        "cc1071c0e68c703009d335d33ae379e335c2bf904bfab25617e03276f6225b25")
    keys = [hashlib.sha256(b"psyche-vector/signer/%d" % i).hexdigest() for i in range(256)]
    assert hashlib.sha256(bloom_of(keys)).hexdigest() == (
        "1b9759648c8de0a9fba1f533d283b11902b7208b9e8d6321770589700595fd78")


def test_keys_are_lowercase_hex_strings():
    b = WitnessBloom()
    with pytest.raises(ValueError):
        b.add("AB" * 32)
    with pytest.raises(ValueError):
        b.add(b"\x00" * 32)


# ---------------------------------------------------------------- malformed bytes

@pytest.mark.parametrize("length", [0, 1, 353, 355, 357, 508, 712])
def test_wrong_length_is_malformed(length):
    with pytest.raises(CoordinatorError) as e:
        check_bloom_bytes(bytes(length))
    assert e.value.code == "MalformedBloom"
    with pytest.raises(CoordinatorError):
        WitnessBloom(bytes(length))


@pytest.mark.parametrize("position", [353, 354, 355])
def test_padding_bytes_set_is_malformed(position):
    data = bytearray(356)
    data[position] = 1
    with pytest.raises(CoordinatorError) as e:
        check_bloom_bytes(bytes(data))
    assert e.value.code == "MalformedBloom"
    with pytest.raises(CoordinatorError):
        bloom_contains(bytes(data), "00" * 32)


def test_last_real_bits_are_accepted():
    data = bytes(352) + b"\x80" + bytes(3)  # bit 2823: the end of slice 7
    assert check_bloom_bytes(data) == data
    assert WitnessBloom(data).to_bytes() == data
    full = b"\xff" * 353 + bytes(3)
    assert WitnessBloom(full).to_bytes() == full
    assert bloom_contains(full, "12" * 32)


def test_not_bytes_is_malformed():
    for bad in ("00" * 356, None, [0] * 356):
        with pytest.raises(CoordinatorError) as e:
            check_bloom_bytes(bad)
        assert e.value.code == "MalformedBloom"
    assert check_bloom_bytes(bytearray(356)) == bytes(356)


def test_the_cores_bit_positions_match_the_documented_layout():
    """`bloom.bit_positions` (what each client slot keeps, from pybloom-live's own hashes)
    against the reimplementation from the docstring."""
    from psyche_coordinator_core.bloom import bit_positions as core_bit_positions

    for k in random_keys(random.Random(5), 500):
        assert list(core_bit_positions(k)) == bit_positions(k)
    with pytest.raises(ValueError, match="lowercase"):
        core_bit_positions("AB")


def test_a_client_slot_keeps_its_signers_bits_and_a_reader_checks_them():
    """Layout 8: each client slot holds `bit_positions` of its signer's hex after the accusers
    (offset 152 of the slot); bits that are not the signer's do not decode."""
    import struct

    from psyche_coordinator_core import RunConfig, new_run
    from psyche_coordinator_core.canonical import (
        CLIENT_SIZE,
        PENDING_OFFSET,
        LayoutError,
        from_bytes,
        to_bytes,
    )
    from psyche_coordinator_core.coordinator import join, resume

    signer = hashlib.sha256(b"psyche-vector/signer/0").digest()
    s = new_run("bits", RunConfig(), 1)
    resume(s, 0)
    join(s, 0, signer, bytes(32))
    raw = bytearray(to_bytes(s))
    slot = PENDING_OFFSET  # the pending entry of the one join
    assert CLIENT_SIZE == 168
    assert list(struct.unpack_from("<8H", raw, slot + 152)) == [
        346, 407, 913, 1129, 1487, 1788, 2211, 2544]
    assert from_bytes(bytes(raw)).pending[0].signer == signer
    raw[slot + 152] ^= 1
    with pytest.raises(LayoutError, match="bloom bits"):
        from_bytes(bytes(raw))
