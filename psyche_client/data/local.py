"""Tokens from a directory of token files on this machine; with the run's data manifest
(manifest.py), each chunk is checked against its hash the first time a sequence is read from
it."""

import numpy as np

from .manifest import ChunkCheck, manifest_name
from .provider import check_range
from .sequences import NO_SHUFFLE, FileSpan, SequenceIndex
from .token_files import list_token_files, open_tokens


class LocalDataProvider:
    def __init__(self, directory, token_size: int, seq_len: int, shuffle_seed: bytes = NO_SHUFFLE,
                 manifest=None, manifest_location: str = None):
        paths = list_token_files(directory)
        self.arrays = [open_tokens(p, token_size) for p in paths]
        self.index = SequenceIndex([FileSpan(p.name, len(a)) for p, a in zip(paths, self.arrays)],
                                   seq_len, shuffle_seed)
        self.seq_len, self.token_size = seq_len, token_size
        self.checks = []  # per file: (ChunkCheck, where its tokens start in the file, dtype)
        for p, arr in zip(paths, self.arrays):
            if manifest is None:
                break
            raw = np.memmap(p, np.uint8, mode="r") if p.stat().st_size else np.zeros(0, np.uint8)
            check = ChunkCheck(manifest.file(manifest_name(manifest_location, str(p))),
                               manifest.chunk_bytes, lambda a, b, raw=raw: raw[a:b].tobytes(),
                               str(p), remember=True)
            check.check_size(len(raw))
            # .npy: the tokens start after its header, in its byte order
            self.checks.append((check, getattr(arr, "offset", 0), arr.dtype))

    def get_samples(self, start: int, end: int) -> np.ndarray:
        n = check_range(start, end)
        out = np.empty((n, self.seq_len), np.int64)
        for row, g in enumerate(range(start, end + 1)):
            f, first = self.index.locate(g)
            if self.checks:
                check, offset, dtype = self.checks[f]
                a = offset + first * self.token_size
                out[row] = np.frombuffer(check.bytes(a, a + self.seq_len * self.token_size), dtype)
            else:
                out[row] = self.arrays[f][first:first + self.seq_len]
        return out
