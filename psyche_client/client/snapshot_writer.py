"""Where a checkpointer's snapshots go: written atomically to --checkpoint-dir (else a temporary
directory), then uploaded to the run's snapshot store; after a recorded one, the store is
pruned to the run's last `keep`. Blocking I/O: the daemon runs it off its event loop, one
snapshot at a time, while training goes on."""

import logging
import shutil
import tempfile
import time
from pathlib import Path

from ..snapshots import SnapshotStoreError, write_snapshot_dir

log = logging.getLogger(__name__)


class SnapshotWriter:
    def __init__(self, run_id: str, store=None, checkpoint_dir=None, keep: int = 3):
        """`store`: the run's store opened with this client's write credentials, or None
        (snapshots only kept in `checkpoint_dir`)."""
        self.run_id, self.store, self.keep = run_id, store, keep
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None

    def write(self, epoch: int, step: int, param_hash: str, files: dict) -> Path:
        root = self.checkpoint_dir or Path(tempfile.mkdtemp(prefix="psyche-checkpoint-"))
        path = write_snapshot_dir(root, run_id=self.run_id, epoch=epoch, step=step,
                                  param_hash=param_hash, files=files)
        size = sum(len(b) for b in files.values())
        log.info("snapshot of step %d (epoch %d, params %s, %s bytes) written to %s", step,
                 epoch, param_hash[:16], f"{size:,}", path)
        return path

    def upload(self, path: Path) -> str | None:
        """The snapshot's location in the store, or None when the upload failed (logged: the
        run goes on, the next snapshot point tries again)."""
        started = time.time()
        last = [0.0]

        def progress(sent):  # a line every few seconds on long uploads (logs have no bar)
            if time.time() - last[0] >= 5:
                last[0] = time.time()
                log.info("uploading %s: %s bytes sent", path.name, f"{sent:,}")
        try:
            location = self.store.put(path, on_progress=progress)
        except (SnapshotStoreError, OSError) as e:
            log.warning("upload of the snapshot in %s to %s failed: %s: %s", path,
                        self.store.describe(), type(e).__name__, e)
            return None
        finally:
            if self.checkpoint_dir is None:
                shutil.rmtree(path.parent, ignore_errors=True)
        stats = self.store.last_transfer
        log.info("uploaded %s to %s in %.1f s (%s bytes sent, %d files already stored): "
                 "location %s", path.name, self.store.describe(), time.time() - started,
                 f"{stats.bytes_uploaded:,}", len(stats.skipped), location)
        return location

    def prune(self) -> None:
        try:
            removed = self.store.prune(self.keep)
        except SnapshotStoreError as e:
            log.warning("pruning %s failed: %s: %s", self.store.describe(), type(e).__name__, e)
            return
        if removed:
            log.info("pruned %d snapshot(s) from %s, keeping the last %d", len(removed),
                     self.store.describe(), self.keep)
