"""Tokens from token files served over HTTP, fetched with byte-range requests.

File sizes come from HEAD requests up front; each sequence is one `Range: bytes=a-b` request
(consecutive sequences of one file are merged into one request). The response must be exactly
the requested bytes."""

import urllib.error
import urllib.request

import numpy as np

from .provider import DataError, check_range
from .sequences import NO_SHUFFLE, FileSpan, SequenceIndex
from .token_files import DTYPES

TIMEOUT = 10
RETRIES = 3


def _request(req):
    last = None
    for _ in range(RETRIES):
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            raise DataError(f"{req.full_url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            last = e
    raise DataError(f"{req.full_url}: {last}")


class HttpDataProvider:
    def __init__(self, urls: list, token_size: int, seq_len: int, shuffle_seed: bytes = NO_SHUFFLE):
        if not urls:
            raise DataError("no URLs given")
        if token_size not in DTYPES:
            raise DataError("token_size must be 2 (u16) or 4 (u32)")
        self.urls, self.token_size, self.seq_len = list(urls), token_size, seq_len
        spans = []
        for url in self.urls:
            _, headers, _ = _request(urllib.request.Request(url, method="HEAD"))
            length = headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise DataError(f"{url}: the server gives no Content-Length")
            spans.append(FileSpan(url, int(length) // token_size))
        self.index = SequenceIndex(spans, seq_len, shuffle_seed)

    def _fetch(self, url: str, first_token: int, tokens: int) -> np.ndarray:
        a = first_token * self.token_size
        b = a + tokens * self.token_size - 1
        status, _, body = _request(urllib.request.Request(url, headers={"Range": f"bytes={a}-{b}"}))
        if status != 206 or len(body) != b - a + 1:
            raise DataError(f"{url}: asked for bytes {a}-{b}, got HTTP {status} with "
                            f"{len(body)} bytes (does the server support Range requests?)")
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
            chunk = self._fetch(self.urls[f], first, run * self.seq_len)
            out[row:row + run] = chunk.reshape(run, self.seq_len)
            row += run
        return out
