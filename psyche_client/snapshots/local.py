"""The snapshot store in a local directory (or a shared file system): the same layout as the
bucket, every file written under a temporary name, fsync'd and renamed."""

import os
from pathlib import Path

from .errors import SnapshotNotFound, StoreAccessDenied
from .fsio import copy_durable, fsync_path, temp_sibling, write_durable
from .manifest import is_location
from .store import SnapshotStore

CHUNK = 8 << 20


class LocalStore(SnapshotStore):
    def __init__(self, root, progress: bool = True):
        super().__init__()
        self.root = Path(root)
        self.progress = progress
        self.blobs = self.root / "blobs"
        self.manifests = self.root / "manifests"

    def describe(self) -> str:
        return f"the local store {self.root}"

    def _writable(self):
        try:
            self.blobs.mkdir(parents=True, exist_ok=True)
            self.manifests.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise StoreAccessDenied(f"cannot write to {self.describe()}") from None

    def _publish_file(self, final: Path, fill):
        tmp = temp_sibling(final)
        try:
            fill(tmp)
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_path(final.parent)

    def _has_blob(self, sha256):
        return (self.blobs / sha256).is_file()

    def _upload_blob(self, sha256, path, size, advance):
        self._writable()
        self._publish_file(self.blobs / sha256, lambda tmp: copy_durable(path, tmp))
        advance(size)

    def _has_manifest(self, location):
        return (self.manifests / f"{location}.json").is_file()

    def _put_manifest(self, location, data):
        self._writable()
        self._publish_file(self.manifests / f"{location}.json",
                           lambda tmp: write_durable(tmp, data))

    def _read_manifest(self, location):
        try:
            return (self.manifests / f"{location}.json").read_bytes()
        except FileNotFoundError:
            raise SnapshotNotFound(f"no snapshot {location} in {self.describe()}") from None

    def _manifest_locations(self):
        if not self.manifests.is_dir():
            return []
        return sorted(p.stem for p in self.manifests.glob("*.json") if is_location(p.stem))

    def _blob_locations(self):
        if not self.blobs.is_dir():
            return []
        return sorted(p.name for p in self.blobs.iterdir() if is_location(p.name))

    def _stream_blob(self, sha256, offset, write):
        try:
            f = open(self.blobs / sha256, "rb")
        except FileNotFoundError:
            raise SnapshotNotFound(f"blob {sha256} is missing from {self.describe()}") from None
        with f:
            f.seek(offset)
            while chunk := f.read(CHUNK):
                write(chunk)

    def _delete_manifest(self, location):
        (self.manifests / f"{location}.json").unlink(missing_ok=True)

    def _delete_blob(self, sha256):
        (self.blobs / sha256).unlink(missing_ok=True)
