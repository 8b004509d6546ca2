"""HTTP GETs for data: retried on network errors (never on an HTTP error status), bounded in
size, each failure a DataError naming the URL."""

import urllib.error
import urllib.request

from .provider import DataError

TIMEOUT = 10
RETRIES = 3


def request(req):
    """(status, headers, body) of `req`, tried RETRIES times while the network fails."""
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


def get_bytes(url: str, limit: int) -> bytes:
    """The body at `url`, refused past `limit` bytes (read no further than that)."""
    last = None
    for _ in range(RETRIES):
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
                body = resp.read(limit + 1)
            break
        except urllib.error.HTTPError as e:
            raise DataError(f"{url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            last = e
    else:
        raise DataError(f"{url}: {last}")
    if len(body) > limit:
        raise DataError(f"{url}: over {limit} bytes")
    return body
