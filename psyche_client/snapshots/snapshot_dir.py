"""A snapshot on disk: one directory with the model's files (`config.json`,
`model.safetensors`) and `manifest.json`. Written atomically: the directory is filled under a
temporary name, every file and the directory fsync'd, then renamed into place, so a crash
mid-write leaves the previous snapshot whole and no half-written one under the final name."""

import hashlib
import shutil
from pathlib import Path

from .errors import ManifestInvalid, SnapshotCorrupt
from .fsio import copy_durable, fsync_path, publish, temp_sibling, write_durable
from .manifest import MANIFEST_NAME, FileEntry, Manifest, sha256_file


def snapshot_dir_name(step: int) -> str:
    return f"step-{step}"


def write_snapshot_dir(root, *, run_id: str, epoch: int, step: int, param_hash: str,
                       files: dict, name: str | None = None) -> Path:
    """Writes the snapshot to `root/name` (default `step-<step>`) and returns that path.
    `files` maps each file name to its bytes or to a path to copy. A directory already there
    under that name is replaced atomically; other snapshots in `root` are left alone."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / (name or snapshot_dir_name(step))
    if not files:
        raise ManifestInvalid("a snapshot needs at least one file")
    tmp = temp_sibling(final)
    tmp.mkdir()
    try:
        entries = {}
        for fname, content in files.items():
            if fname == MANIFEST_NAME:
                raise ManifestInvalid(f"{MANIFEST_NAME} is written by write_snapshot_dir itself")
            target = tmp / fname
            if isinstance(content, (bytes, bytearray, memoryview)):
                write_durable(target, bytes(content))
                entries[fname] = FileEntry(hashlib.sha256(content).hexdigest(), len(content))
            else:
                copy_durable(Path(content), target)
                entries[fname] = FileEntry(sha256_file(target), target.stat().st_size)
        manifest = Manifest(run_id, epoch, step, param_hash, entries)
        write_durable(tmp / MANIFEST_NAME, manifest.to_bytes())
        fsync_path(tmp)
        publish(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def verify_snapshot_dir(snapshot_dir) -> Manifest:
    """The directory's manifest, after checking every file's size and SHA-256 against it."""
    snapshot_dir = Path(snapshot_dir)
    manifest = Manifest.read(snapshot_dir)
    for fname, entry in manifest.files.items():
        path = snapshot_dir / fname
        if not path.is_file():
            raise SnapshotCorrupt(f"{snapshot_dir}: {fname} is missing")
        if path.stat().st_size != entry.size or sha256_file(path) != entry.sha256:
            raise SnapshotCorrupt(f"{snapshot_dir}: {fname} does not match its manifest "
                                  f"(expected sha256 {entry.sha256[:16]}..., {entry.size} bytes)")
    return manifest
