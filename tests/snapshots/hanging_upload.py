"""A checkpointer's upload that stops mid-multipart, for tests/snapshots/test_killed_upload.py:
the store's own put, whose progress callback, once AFTER bytes have gone out, creates MARKER
and then holds every upload thread until the test SIGKILLs the process.

    python tests/snapshots/hanging_upload.py URL ENDPOINT SNAPSHOT_DIR MARKER AFTER
(write credentials from PSYCHE_S3_ACCESS_KEY / PSYCHE_S3_SECRET_KEY)"""

import sys
import threading
from pathlib import Path

from psyche_client.snapshots import open_store
from psyche_client.snapshots.s3 import credentials_from_env

PART_SIZE = 5 << 20
CONCURRENCY = 2


def main(url, endpoint, snapshot_dir, marker, after):
    store = open_store(url, endpoint=endpoint, credentials=credentials_from_env(),
                       progress=False, part_size=PART_SIZE, concurrency=CONCURRENCY)
    held = threading.Event()  # never set: the process ends by SIGKILL

    def on_progress(sent):
        if sent >= int(after):
            Path(marker).touch()
            held.wait()
    store.put(snapshot_dir, on_progress=on_progress)
    print("hanging_upload: the put finished, which the test does not expect", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
