"""Witness bloom filters on pybloom-live with fixed protocol parameters.

Keys are lowercase hex strings (a signer's public key, a result commitment), so any language
reproduces the bits: for a key k, h = XXH3-128(XXH3-128(u32_le(0)) || utf8(k)), each digest as
its canonical 16 big-endian bytes; the 8 little-endian u16 words of h, each mod 353, give one bit
per slice; slice s owns bits [353*s, 353*(s+1)). Bit i lives in byte i // 8 at bit i % 8 (least
significant first): 2,824 bits fill 353 bytes, followed by 3 zero bytes (356 on the wire).
pybloom-live packs and unpacks in native byte order: the layout above is what it produces on
little-endian hosts (x86-64, ARM64), which is every machine this project supports."""

import bitarray
from pybloom_live import BloomFilter

from .constants import (
    BLOOM_BITS,
    BLOOM_BITS_PER_SLICE,
    BLOOM_BYTES,
    BLOOM_CAPACITY,
    BLOOM_ERROR_RATE,
    BLOOM_SLICES,
)
from .errors import CoordinatorError

EMPTY_BLOOM = bytes(BLOOM_BYTES)


def _new_filter() -> BloomFilter:
    f = BloomFilter(capacity=BLOOM_CAPACITY, error_rate=BLOOM_ERROR_RATE)
    # The protocol constants are derived from these two numbers; fail loudly if a pybloom-live
    # release ever sized its filters differently.
    assert (f.num_slices, f.bits_per_slice) == (BLOOM_SLICES, BLOOM_BITS_PER_SLICE)
    return f


USED_BYTES = BLOOM_BITS // 8  # 353: the filter's bits end on a byte boundary


def check_bloom_bytes(data: bytes) -> bytes:
    """Reject anything that is not exactly a filter's bytes with the padding clear."""
    if not isinstance(data, (bytes, bytearray)) or len(data) != BLOOM_BYTES:
        raise CoordinatorError("MalformedBloom", f"expected {BLOOM_BYTES} bytes")
    if any(data[USED_BYTES:]):
        raise CoordinatorError("MalformedBloom",
                               f"padding bytes {USED_BYTES}..{BLOOM_BYTES - 1} must be zero")
    return bytes(data)


class WitnessBloom:
    """A fixed-size filter that serializes to exactly BLOOM_BYTES bytes."""

    def __init__(self, data: bytes = EMPTY_BLOOM):
        self._filter = _new_filter()
        bits = bitarray.bitarray(endian="little")
        bits.frombytes(check_bloom_bytes(data)[:USED_BYTES])
        self._filter.bitarray = bits

    def add(self, key_hex: str) -> None:
        """Add a key; a key already present is not counted twice. A round never has more
        than 256 trainers, so a 257th distinct key is a caller's bug."""
        try:
            self._filter.add(_check_key(key_hex))
        except IndexError:
            raise ValueError(f"a witness bloom holds at most {BLOOM_CAPACITY} keys") from None

    def __contains__(self, key_hex: str) -> bool:
        return _check_key(key_hex) in self._filter

    def to_bytes(self) -> bytes:
        return self._filter.bitarray.tobytes().ljust(BLOOM_BYTES, b"\0")


def _check_key(key_hex: str) -> str:
    if not isinstance(key_hex, str) or key_hex != key_hex.lower():
        raise ValueError("bloom keys are lowercase hex strings")
    return key_hex


def bloom_of(keys) -> bytes:
    """Bytes of a filter holding every key in `keys`."""
    b = WitnessBloom()
    for k in keys:
        b.add(k)
    return b.to_bytes()


def bloom_contains(data: bytes, key_hex: str) -> bool:
    return key_hex in WitnessBloom(data)


_MAKE_HASHES = _new_filter().make_hashes  # pybloom-live's own per-slice positions


def bit_positions(key_hex: str) -> tuple[int, ...]:
    """The bit each slice sets for a key (slice s's offset 353 * s included): the coordinator
    keeps them with each client (of its signer's hex), so that checking a client against every
    witness's bloom needs no hash (on chain, a hash of 256 signers took most of a round's end)."""
    return tuple(s * BLOOM_BITS_PER_SLICE + h
                 for s, h in enumerate(_MAKE_HASHES(_check_key(key_hex))))
