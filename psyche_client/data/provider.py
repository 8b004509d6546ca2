"""The provider interface: the tokens of a batch of sequences."""

from typing import Protocol

import numpy as np

MAX_BATCH_SEQUENCES = 4096  # a request for more is refused, not attempted


class DataError(Exception):
    """Data could not be read (missing file, short read, refused request)."""


class DataProvider(Protocol):
    seq_len: int

    def get_samples(self, start: int, end: int) -> np.ndarray:
        """Tokens of sequences start..end inclusive: int64 array [end - start + 1, seq_len]."""


def check_range(start: int, end: int) -> int:
    if not (isinstance(start, int) and isinstance(end, int)) or not 0 <= start <= end:
        raise DataError(f"bad sequence range [{start}, {end}]")
    n = end - start + 1
    if n > MAX_BATCH_SEQUENCES:
        raise DataError(f"{n} sequences requested; at most {MAX_BATCH_SEQUENCES} at once")
    return n
