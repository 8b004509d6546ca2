"""Durable, atomic file-system steps shared by the snapshot writer and the stores: a file or a
directory is built under a temporary name, fsync'd, then renamed into place, so a crash leaves
either the old state or the new one, never half of it."""

import os
import shutil
import uuid
from pathlib import Path

COPY_CHUNK = 8 << 20


def fsync_path(path: Path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes):
    """Writes `path` in place (the caller owns a temporary name) and fsyncs it."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def copy_durable(src: Path, dst: Path):
    """Copies `src` to `dst` (the caller owns a temporary name) and fsyncs it. shutil.copyfile
    uses the kernel's copy (sendfile) on Linux: the disk baseline in benchmarks/snapshot.py
    does the same."""
    shutil.copyfile(src, dst)
    fsync_path(dst)


def temp_sibling(path: Path, tag: str = "tmp") -> Path:
    """A unique hidden name beside `path` (same directory, so a rename is atomic)."""
    return path.with_name(f".{path.name}.{tag}-{uuid.uuid4().hex[:12]}")


def publish(tmp: Path, final: Path):
    """Renames a finished file or directory into place and makes the rename durable. An existing
    directory at `final` is moved aside first and removed after; the window in between holds no
    `final`, never a partial one."""
    aside = None
    if final.is_dir() and not final.is_symlink():
        aside = temp_sibling(final, "old")
        os.rename(final, aside)
    os.replace(tmp, final)
    fsync_path(final.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
