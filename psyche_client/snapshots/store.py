"""The snapshot store's one interface, and its common logic over a few primitives that each
backend (a local directory, an S3 bucket) provides.

Layout, the same in both: `blobs/<sha256>` holds each file's bytes under its own hash
(write-once, content-addressed: a file already stored is never uploaded again), and
`manifests/<location>.json` the manifest, written last, so a snapshot is listed only once every
blob it names is stored. `location` = SHA-256 of the manifest's canonical bytes."""

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ManifestInvalid, SnapshotCorrupt, SnapshotNotFound, SnapshotStoreError
from .fsio import fsync_path, publish, write_durable
from .hashing import BackgroundSha256, file_sha256_in_background
from .manifest import MANIFEST_NAME, Manifest, is_location
from .progress import transfer_progress


@dataclass
class TransferStats:
    """What the last put or get moved: tests and benchmarks read it."""
    uploaded: list = field(default_factory=list)     # blob hashes sent
    skipped: list = field(default_factory=list)      # blob hashes already stored
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0                        # fetched from the store, resumes excluded
    resumed: list = field(default_factory=list)      # file names continued from a .part file


def partial_dir(dest: Path, location: str) -> Path:
    """Where an unfinished get keeps its files; the same for a retry, so it resumes."""
    return dest.with_name(f".{dest.name}.partial-{location[:16]}")


class SnapshotStore:
    progress: bool = True

    def __init__(self):
        self.last_transfer = TransferStats()

    # -- primitives each backend provides -------------------------------------------------
    def describe(self) -> str:
        raise NotImplementedError

    def _has_blob(self, sha256: str) -> bool:
        raise NotImplementedError

    def _upload_blob(self, sha256: str, path: Path, size: int, advance):
        raise NotImplementedError

    def _has_manifest(self, location: str) -> bool:
        raise NotImplementedError

    def _put_manifest(self, location: str, data: bytes):
        raise NotImplementedError

    def _read_manifest(self, location: str) -> bytes:
        """Raises SnapshotNotFound when absent."""
        raise NotImplementedError

    def _manifest_locations(self) -> list:
        raise NotImplementedError

    def _blob_locations(self) -> list:
        raise NotImplementedError

    def _stream_blob(self, sha256: str, offset: int, write):
        """Calls write(chunk) with the blob's bytes from `offset` to its end."""
        raise NotImplementedError

    def _delete_manifest(self, location: str):
        raise NotImplementedError

    def _delete_blob(self, sha256: str):
        raise NotImplementedError

    # -- the interface --------------------------------------------------------------------
    def put(self, snapshot_dir, on_progress=None) -> str:
        """Stores the snapshot directory and returns its location. Blobs already stored are
        skipped; the manifest goes last. Each file sent is hashed while it is sent: one that
        does not match its manifest is removed from the store again and the put fails with
        SnapshotCorrupt before any manifest names it. on_progress(bytes_sent_so_far) is
        called as bytes go out."""
        snapshot_dir = Path(snapshot_dir)
        manifest = Manifest.read(snapshot_dir)
        data = manifest.to_bytes()
        location = hashlib.sha256(data).hexdigest()
        stats = self.last_transfer = TransferStats()
        todo = {}
        for name, entry in sorted(manifest.files.items()):
            path = snapshot_dir / name
            if not path.is_file() or path.stat().st_size != entry.size:
                raise SnapshotCorrupt(f"{snapshot_dir}: {name} is missing or not the size its "
                                      "manifest gives")
            if entry.sha256 in todo or entry.sha256 in stats.skipped:
                continue
            if self._has_blob(entry.sha256):
                stats.skipped.append(entry.sha256)
            else:
                todo[entry.sha256] = (path, entry.size)
        total = sum(size for _, size in todo.values())
        with transfer_progress(self.progress, f"upload step {manifest.step}", total) as bar:
            def advance(n):
                stats.bytes_uploaded += n
                bar(n)
                if on_progress is not None:
                    on_progress(stats.bytes_uploaded)
            for sha, (path, size) in todo.items():
                check = file_sha256_in_background(path)
                try:
                    self._upload_blob(sha, path, size, advance)
                finally:
                    actual = check.result()
                if actual != sha:
                    self._delete_blob(sha)  # stored under a hash it does not have
                    raise SnapshotCorrupt(f"{path} does not match its manifest (sha256 "
                                          f"{actual[:16]}..., expected {sha[:16]}...)")
                stats.uploaded.append(sha)
        if not self._has_manifest(location):
            self._put_manifest(location, data)
        return location

    def manifest(self, location: str) -> Manifest:
        """The manifest at `location`, checked to hash to it."""
        if not is_location(location):
            raise SnapshotNotFound(f"{location!r} is not a snapshot location (64 hex digits)")
        data = self._read_manifest(location)
        if hashlib.sha256(data).hexdigest() != location:
            raise SnapshotCorrupt(f"the manifest stored at {location} in {self.describe()} does "
                                  "not hash to its location")
        return Manifest.from_bytes(data)

    def get(self, location: str, dest_dir) -> Manifest:
        """Downloads the snapshot into `dest_dir` (replaced atomically when it exists) with
        every file's SHA-256 checked. An interrupted get leaves `.part` files in a hidden
        directory beside `dest_dir`; the next get of the same location continues them."""
        dest = Path(dest_dir)
        manifest = self.manifest(location)
        dest.parent.mkdir(parents=True, exist_ok=True)
        work = partial_dir(dest, location)
        work.mkdir(exist_ok=True)
        stats = self.last_transfer = TransferStats()
        with transfer_progress(self.progress, f"download step {manifest.step}",
                               manifest.total_size) as bar:
            for name, entry in sorted(manifest.files.items()):
                self._fetch_file(work, name, entry, stats, bar)
        write_durable(work / MANIFEST_NAME, manifest.to_bytes())
        fsync_path(work)
        publish(work, dest)
        return manifest

    def _fetch_file(self, work: Path, name: str, entry, stats: TransferStats, bar):
        final, part = work / name, work / (name + ".part")
        if final.exists():  # finished by an earlier, interrupted get
            return
        for attempt in (0, 1):
            have = part.stat().st_size if part.exists() else 0
            if have > entry.size:
                have = 0
            existing = hashlib.sha256()
            with open(part, "r+b" if have else "wb") as f:
                if have:
                    stats.resumed.append(name)
                    while chunk := f.read(8 << 20):
                        existing.update(chunk)
                    f.seek(have)
                    f.truncate()
                    bar(have)
                h = BackgroundSha256(existing)
                try:
                    def write(chunk):
                        f.write(chunk)
                        h.update(chunk)
                        stats.bytes_downloaded += len(chunk)
                        bar(len(chunk))
                    if have < entry.size:
                        self._stream_blob(entry.sha256, have, write)
                    f.flush()
                    os.fsync(f.fileno())
                finally:
                    h.close()
            if part.stat().st_size == entry.size and h.hexdigest() == entry.sha256:
                part.rename(final)
                return
            part.unlink()
            if not have:  # a fresh download that does not match: the stored blob is bad
                break
        raise SnapshotCorrupt(f"{name} of the snapshot in {self.describe()} does not match its "
                              f"manifest: blobs/{entry.sha256} is corrupt")

    def list(self) -> list:
        """[(location, Manifest)] of every complete snapshot, oldest step first (manifests that
        do not hash to their location or do not parse are left out)."""
        found = []
        for location in self._manifest_locations():
            try:
                found.append((location, self.manifest(location)))
            except SnapshotNotFound:
                continue  # pruned between the listing and the read
            except (SnapshotCorrupt, ManifestInvalid):
                # not a snapshot anyone can load: skipped, so one bad manifest written into a
                # shared store cannot hide the good ones from a loader looking for another copy
                continue
        return sorted(found, key=lambda lm: (lm[1].step, lm[1].epoch, lm[0]))

    def prune(self, keep: int) -> list:
        """Keeps the `keep` snapshots of the highest steps; removes the others' manifests, then
        the blobs that only they referenced. Returns the removed locations. Blobs that no
        manifest names yet (a put in progress elsewhere) are left alone."""
        if not isinstance(keep, int) or keep < 1:
            raise SnapshotStoreError(f"prune: keep must be at least 1, not {keep!r}")
        snapshots = self.list()
        if len(snapshots) <= keep:
            return []
        removed, kept = snapshots[:-keep], snapshots[-keep:]
        still_used = {e.sha256 for _, m in kept for e in m.files.values()}
        orphans = {e.sha256 for _, m in removed for e in m.files.values()} - still_used
        for location, _ in removed:  # manifests first: no listed snapshot ever lacks a blob
            self._delete_manifest(location)
        for sha in sorted(orphans):
            self._delete_blob(sha)
        return [location for location, _ in removed]


def remove_partial(dest_dir, location: str):
    """Forgets an unfinished get of `location` into `dest_dir`."""
    shutil.rmtree(partial_dir(Path(dest_dir), location), ignore_errors=True)
