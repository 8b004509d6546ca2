"""HTTP requests for data: retried on network errors (never on an HTTP error status), bounded in
size when asked, each failure a DataError naming the URL."""

import urllib.error
import urllib.request

from .provider import DataError

TIMEOUT = 10
RETRIES = 3


class TooLarge(DataError):
    """A body over the size asked for."""


def request(req, limit: int = None):
    """(status, headers, body) of `req`, tried RETRIES times while the network fails; with
    `limit`, a body over that many bytes is refused (and read no further)."""
    last = None
    for _ in range(RETRIES):
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                body = resp.read() if limit is None else resp.read(limit + 1)
                break
        except urllib.error.HTTPError as e:
            raise DataError(f"{req.full_url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            last = e
    else:
        raise DataError(f"{req.full_url}: {last}")
    if limit is not None and len(body) > limit:
        raise TooLarge(f"{req.full_url}: over {limit} bytes")
    return resp.status, resp.headers, body


def get_bytes(url: str, limit: int) -> bytes:
    """The body at `url`, at most `limit` bytes."""
    return request(urllib.request.Request(url), limit)[2]
