"""The blob protocol (BLOB_ALPN): content-addressed bytes, served from a BlobStore and fetched
whole, checked against their SHA-256 on arrival. The wire format is in the package docstring;
IrohNode (iroh_node.py) owns the connections and calls these on its streams."""

import asyncio
import hashlib
import logging
from collections import OrderedDict

from . import iroh_fastpath
from .errors import BlobError, BlobHashMismatch, BlobNotFound, BlobTooLarge

iroh_fastpath.install()  # serving writes whole blobs: never through the per-byte copy

import iroh  # noqa: E402  (after the fast path is in place)

BLOB_ALPN = b"psyche/blob/1"
DEFAULT_MAX_BLOB = 1 << 30
CHUNK = 1 << 20  # bytes per stream write / read call: large enough to amortise the FFI hop

_FOUND, _NOT_FOUND, _BAD_REQUEST = 0, 1, 2
_ERR_TOO_LARGE = 1  # application error code for stopping a stream

logger = logging.getLogger(__name__)


def blob_hash(data) -> str:
    return hashlib.sha256(data).hexdigest()


def hash_bytes(hash_hex: str) -> bytes:
    """The 32 bytes a fetch sends; BlobError for anything that is not a blob hash."""
    try:
        raw = bytes.fromhex(hash_hex)
    except (TypeError, ValueError):
        raw = b""
    if len(raw) != 32:
        raise BlobError(f"not a blob hash: {hash_hex!r}")
    return raw


class BlobStore:
    """Blobs in memory by hash; with `max_bytes`, the oldest are dropped to stay under it."""

    def __init__(self, max_bytes=None):
        self.max_bytes = max_bytes
        self._blobs = OrderedDict()
        self.total = 0

    def add(self, data) -> str:
        data = bytes(data)
        h = blob_hash(data)
        if h not in self._blobs:
            self._blobs[h] = data
            self.total += len(data)
            limit = self.max_bytes  # None: unbounded
            while limit is not None and self.total > limit and len(self._blobs) > 1:
                self.total -= len(self._blobs.popitem(last=False)[1])
        return h

    def get(self, hash_hex: str):
        return self._blobs.get(hash_hex)

    def remove(self, hash_hex: str) -> bool:
        data = self._blobs.pop(hash_hex, None)
        if data is not None:
            self.total -= len(data)
        return data is not None

    def __contains__(self, hash_hex) -> bool:
        return hash_hex in self._blobs

    def __len__(self) -> int:
        return len(self._blobs)


# fetching: ask on a connection, then read what the peer answered
async def ask(conn, raw: bytes):
    """(recv stream, status byte) for the blob `raw` on one new stream of `conn`."""
    bi = await conn.open_bi()
    send, recv = bi.send(), bi.recv()
    await send.write_all(raw)
    await send.finish()
    return recv, (await recv.read_exact(1))[0]


async def receive(recv, status: int, raw: bytes, limit: int, peer) -> bytes:
    """The blob after `ask`: refused before reading when over `limit`, verified after."""
    if status == _NOT_FOUND:
        raise BlobNotFound(f"peer {peer} has no blob {raw.hex()}")
    if status != _FOUND:
        raise BlobError(f"peer {peer} refused the request (status {status})")
    size = int.from_bytes(await recv.read_exact(8), "big")
    if size > limit:
        await recv.stop(_ERR_TOO_LARGE)
        raise BlobTooLarge(f"blob {raw.hex()} is {size} bytes, over the limit of {limit}")
    chunks, h, got = [], hashlib.sha256(), 0
    while got < size:
        chunk = await recv.read_exact(min(CHUNK, size - got))
        h.update(chunk)
        chunks.append(chunk)
        got += len(chunk)
    if h.digest() != raw:
        raise BlobHashMismatch(f"peer {peer} sent data that does not hash to {raw.hex()}")
    return b"".join(chunks)


# serving
async def serve(bi, store: BlobStore, timeout: float) -> None:
    """Answer one request stream from `store`; a requester that goes away is only logged."""
    send, recv = bi.send(), bi.recv()
    try:
        try:
            request = await asyncio.wait_for(recv.read_to_end(64), timeout)
        except iroh.IrohError:  # over 64 bytes: answer, rather than leave the fetcher waiting
            request = b""
        if len(request) != 32:
            await send.write_all(bytes([_BAD_REQUEST]))
        else:
            data = store.get(request.hex())
            if data is None:
                await send.write_all(bytes([_NOT_FOUND]))
            else:
                await send.write_all(bytes([_FOUND]) + len(data).to_bytes(8, "big"))
                view = memoryview(data)
                for off in range(0, len(data), CHUNK):
                    await send.write_all(view[off:off + CHUNK])
        await send.finish()
    except (iroh.IrohError, asyncio.TimeoutError) as e:
        logger.debug("serving a blob: %s", e)  # e.g. the fetcher stopped reading (too large)
