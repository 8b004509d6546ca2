"""Tokens from token files served over HTTP, fetched with byte-range requests.

File sizes come from HEAD requests up front; each sequence is one `Range: bytes=a-b` request
(consecutive sequences of one file are merged into one request). The response must be exactly
the requested bytes. With the run's data manifest (manifest.py), each request grows to whole
chunks, and every chunk is checked against its hash each time it arrives."""

import urllib.request

import numpy as np

from .fetch import request
from .manifest import ChunkCheck, manifest_name
from .provider import DataError, check_range
from .sequences import NO_SHUFFLE, FileSpan, SequenceIndex
from .token_files import DTYPES


class HttpDataProvider:
    def __init__(self, urls: list, token_size: int, seq_len: int, shuffle_seed: bytes = NO_SHUFFLE,
                 manifest=None, manifest_location: str = None):
        """`manifest` (a Manifest) and `manifest_location` (its URL, which names the files
        relative to it): check every byte against it; without, the bytes are taken as they
        come."""
        if not urls:
            raise DataError("no URLs given")
        if token_size not in DTYPES:
            raise DataError("token_size must be 2 (u16) or 4 (u32)")
        self.urls, self.token_size, self.seq_len = list(urls), token_size, seq_len
        spans, self.checks = [], []
        for url in self.urls:
            _, headers, _ = request(urllib.request.Request(url, method="HEAD"))
            length = headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise DataError(f"{url}: the server gives no Content-Length")
            spans.append(FileSpan(url, int(length) // token_size))
            if manifest is not None:
                check = ChunkCheck(manifest.file(manifest_name(manifest_location, url)),
                                   manifest.chunk_bytes, self._range(url), url)
                check.check_size(int(length))
                self.checks.append(check)
        self.index = SequenceIndex(spans, seq_len, shuffle_seed)

    @staticmethod
    def _range(url):
        def read(a: int, b: int) -> bytes:  # bytes a..b-1
            status, _, body = request(urllib.request.Request(
                url, headers={"Range": f"bytes={a}-{b - 1}"}))
            if status != 206 or len(body) != b - a:
                raise DataError(f"{url}: asked for bytes {a}-{b - 1}, got HTTP {status} with "
                                f"{len(body)} bytes (does the server support Range requests?)")
            return body
        return read

    def _fetch(self, f: int, first_token: int, tokens: int) -> np.ndarray:
        a = first_token * self.token_size
        b = a + tokens * self.token_size
        body = self.checks[f].bytes(a, b) if self.checks else self._range(self.urls[f])(a, b)
        return np.frombuffer(body, DTYPES[self.token_size])

    def get_samples(self, start: int, end: int) -> np.ndarray:
        n = check_range(start, end)
        places = [self.index.locate(g) for g in range(start, end + 1)]
        out = np.empty((n, self.seq_len), np.int64)
        row = 0
        while row < n:  # merge runs of consecutive sequences in one file
            f, first = places[row]
            run = 1
            while row + run < n and places[row + run] == (f, first + run * self.seq_len):
                run += 1
            chunk = self._fetch(f, first, run * self.seq_len)
            out[row:row + run] = chunk.reshape(run, self.seq_len)
            row += run
        return out
