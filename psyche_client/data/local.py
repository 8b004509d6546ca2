"""Tokens from a directory of token files on this machine."""

import numpy as np

from .provider import check_range
from .sequences import NO_SHUFFLE, FileSpan, SequenceIndex
from .token_files import list_token_files, open_tokens


class LocalDataProvider:
    def __init__(self, directory, token_size: int, seq_len: int, shuffle_seed: bytes = NO_SHUFFLE):
        paths = list_token_files(directory)
        self.arrays = [open_tokens(p, token_size) for p in paths]
        self.index = SequenceIndex([FileSpan(p.name, len(a)) for p, a in zip(paths, self.arrays)],
                                   seq_len, shuffle_seed)
        self.seq_len, self.token_size = seq_len, token_size

    def get_samples(self, start: int, end: int) -> np.ndarray:
        n = check_range(start, end)
        out = np.empty((n, self.seq_len), np.int64)
        for row, g in enumerate(range(start, end + 1)):
            f, first = self.index.locate(g)
            out[row] = self.arrays[f][first:first + self.seq_len]
        return out
