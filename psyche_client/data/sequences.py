"""Where the tokens of global sequence g live.

A dataset is token files in name order; file f holds `tokens_f // seq_len` whole sequences of
`seq_len` tokens. Sequence g of a run (batch ids grow without bound) is dataset sequence
k = g mod N, moved to shuffled_index(k, N, seed) when a shuffle seed is set. The shuffle is a
keyed Feistel permutation with cycle walking: any sequence's place is computed on its own, the
same way by every provider and every client, without building an N-sized table."""

import bisect
import hashlib
from dataclasses import dataclass

FEISTEL_ROUNDS = 4
NO_SHUFFLE = bytes(32)


def shuffled_index(k: int, n: int, seed: bytes) -> int:
    """A permutation of range(n) keyed by a 32-byte seed (all-zero seed: identity)."""
    if not 0 <= k < n:
        raise ValueError(f"index {k} outside [0, {n})")
    if seed == NO_SHUFFLE or n < 2:
        return k
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask = (1 << half) - 1
    x = k
    while True:  # cycle walking: leave values >= n until the walk lands inside [0, n)
        left, right = x >> half, x & mask
        for r in range(FEISTEL_ROUNDS):
            f = int.from_bytes(hashlib.sha256(seed + bytes([r]) + right.to_bytes(8, "little"))
                               .digest()[:8], "little") & mask
            left, right = right, left ^ f
        x = (left << half) | right
        if x < n:
            return x


@dataclass(frozen=True)
class FileSpan:
    name: str  # file name (local) or URL (HTTP)
    tokens: int  # whole tokens in the file


class SequenceIndex:
    def __init__(self, files: list, seq_len: int, shuffle_seed: bytes = NO_SHUFFLE):
        if seq_len < 1:
            raise ValueError("seq_len must be at least 1")
        self.files, self.seq_len, self.seed = list(files), seq_len, shuffle_seed
        self.starts = []  # first dataset sequence of each file
        total = 0
        for f in self.files:
            self.starts.append(total)
            total += f.tokens // seq_len
        self.num_sequences = total
        if total == 0:
            raise ValueError(f"no file holds a whole sequence of {seq_len} tokens")

    def locate(self, g: int):
        """(file index, first token) of global sequence g."""
        if g < 0:
            raise ValueError("sequence indices are non-negative")
        k = shuffled_index(g % self.num_sequences, self.num_sequences, self.seed)
        f = bisect.bisect_right(self.starts, k) - 1
        return f, (k - self.starts[f]) * self.seq_len
