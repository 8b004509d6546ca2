"""SHA-256 on a worker thread, so that hashing overlaps the transfer: a download's chunks are
hashed while the next ones are read and written, a file being uploaded is hashed while it is
sent (hashlib releases the GIL on large updates)."""

import concurrent.futures
import hashlib
import queue
import threading

from .manifest import sha256_file

DEPTH = 8  # chunks waiting to be hashed: bounds the memory held


class BackgroundSha256:
    def __init__(self, initial: "hashlib._Hash | None" = None):
        self._h = initial or hashlib.sha256()
        self._q = queue.Queue(DEPTH)
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()

    def _run(self):
        while (chunk := self._q.get()) is not None:
            self._h.update(chunk)

    def update(self, chunk: bytes):
        """`chunk` must not change afterwards (bytes, not a reused buffer)."""
        self._q.put(chunk)

    def close(self):
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()

    def hexdigest(self) -> str:
        self.close()
        return self._h.hexdigest()


def file_sha256_in_background(path) -> concurrent.futures.Future:
    """A file's SHA-256, computed on its own thread while the caller sends the file."""
    future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(sha256_file(path))
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(e)
    threading.Thread(target=run, name="sha256-file", daemon=True).start()
    return future
