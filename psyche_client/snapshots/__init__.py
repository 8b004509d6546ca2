"""Snapshots of the model: written atomically on disk, stored in a local directory or an
S3-compatible bucket under content-addressed keys. No torch import: the caller hands the
files' bytes. docs/snapshots.md describes the layout and the interface."""

from .errors import (
    InvalidStoreUrl,
    ManifestFormatUnsupported,
    ManifestInvalid,
    SnapshotCorrupt,
    SnapshotNotFound,
    SnapshotStoreError,
    StoreAccessDenied,
    StoreUnreachable,
)
from .local import LocalStore
from .manifest import MANIFEST_NAME, FileEntry, Manifest, is_location, sha256_file
from .open import open_store
from .snapshot_dir import verify_snapshot_dir, write_snapshot_dir
from .store import SnapshotStore, TransferStats

__all__ = [
    "FileEntry", "InvalidStoreUrl", "LocalStore", "MANIFEST_NAME", "Manifest",
    "ManifestFormatUnsupported", "ManifestInvalid",
    "SnapshotCorrupt", "SnapshotNotFound", "SnapshotStore", "SnapshotStoreError",
    "StoreAccessDenied", "StoreUnreachable", "TransferStats", "is_location", "open_store",
    "sha256_file", "verify_snapshot_dir", "write_snapshot_dir",
]
