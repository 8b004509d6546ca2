"""The manifest's format, atomic snapshot directories, and open_store's URLs (no server)."""

import hashlib
import subprocess
import sys

import pytest

from psyche_client.snapshots import (
    InvalidStoreUrl,
    LocalStore,
    Manifest,
    ManifestFormatUnsupported,
    ManifestInvalid,
    SnapshotCorrupt,
    open_store,
    verify_snapshot_dir,
    write_snapshot_dir,
)
from psyche_client.snapshots import snapshot_dir as snapshot_dir_module
from psyche_client.snapshots.manifest import FileEntry

HASH = "ab" * 32


def test_manifest_bytes_are_canonical_and_hash_to_the_location(tmp_path):
    d = write_snapshot_dir(tmp_path, run_id="run-a", epoch=2, step=40, param_hash=HASH,
                           files={"model.safetensors": b"weights", "config.json": b"{}"})
    data = (d / "manifest.json").read_bytes()
    m = Manifest.from_bytes(data)
    assert data == m.to_bytes()
    assert data.startswith(b'{"epoch":2,"files":{"config.json":')  # sorted keys, compact
    assert m.location == hashlib.sha256(data).hexdigest() and len(m.location) == 64
    assert m.files["model.safetensors"] == FileEntry(hashlib.sha256(b"weights").hexdigest(), 7)
    assert (m.run_id, m.epoch, m.step, m.param_hash) == ("run-a", 2, 40, HASH)
    assert verify_snapshot_dir(d) == m


def test_a_manifest_that_is_not_canonical_or_not_valid_is_refused():
    m = Manifest("r", 0, 1, HASH, {"a.bin": FileEntry(HASH, 3)})
    spaced = m.to_bytes().replace(b",", b", ")
    with pytest.raises(ManifestInvalid, match="canonical"):
        Manifest.from_bytes(spaced)
    with pytest.raises(ManifestInvalid, match="param_hash"):
        Manifest("r", 0, 1, "xyz", {"a.bin": FileEntry(HASH, 3)})
    with pytest.raises(ManifestInvalid, match="not a valid snapshot file name"):
        Manifest("r", 0, 1, HASH, {"../a": FileEntry(HASH, 3)})
    with pytest.raises(ManifestInvalid, match="step"):
        Manifest("r", 0, -1, HASH, {"a.bin": FileEntry(HASH, 3)})
    with pytest.raises(ManifestInvalid, match="not JSON"):
        Manifest.from_bytes(b"\xff")


def test_a_manifest_of_another_format_version_is_refused_by_name():
    """A release that writes snapshots differently bumps the format; this one names the
    version it met rather than a generic field error."""
    newer = Manifest("r", 0, 1, HASH, {"a.bin": FileEntry(HASH, 3)}).to_bytes().replace(
        b'"format":1', b'"format":2')
    with pytest.raises(ManifestFormatUnsupported, match="format 2; this release reads format 1"):
        Manifest.from_bytes(newer)
    with pytest.raises(ManifestInvalid) as bad:  # not a version at all: the generic error
        Manifest.from_bytes(newer.replace(b'"format":2', b'"format":"1"'))
    assert not isinstance(bad.value, ManifestFormatUnsupported)


def test_a_failed_write_leaves_the_previous_snapshot_whole(tmp_path, monkeypatch):
    old = write_snapshot_dir(tmp_path, run_id="r", epoch=0, step=5, param_hash=HASH,
                             files={"config.json": b"{}", "model.safetensors": b"old weights"})
    real = snapshot_dir_module.write_durable

    def crash_on_the_model(path, data):
        if path.name == "model.safetensors":
            real(path, data[: len(data) // 2])  # half written, then the process "dies"
            raise OSError("disk full")
        real(path, data)
    monkeypatch.setattr(snapshot_dir_module, "write_durable", crash_on_the_model)
    for step in (5, 6):  # the same directory rewritten, and the next step's
        with pytest.raises(OSError, match="disk full"):
            write_snapshot_dir(tmp_path, run_id="r", epoch=0, step=step, param_hash=HASH,
                               files={"config.json": b"{}", "model.safetensors": b"new weights"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-5"]  # no temporary left over
    assert verify_snapshot_dir(old).step == 5
    assert (old / "model.safetensors").read_bytes() == b"old weights"


def test_a_tampered_snapshot_directory_is_detected(tmp_path):
    d = write_snapshot_dir(tmp_path, run_id="r", epoch=0, step=1, param_hash=HASH,
                           files={"model.safetensors": b"weights"})
    (d / "model.safetensors").write_bytes(b"weighTs")
    with pytest.raises(SnapshotCorrupt, match="model.safetensors"):
        verify_snapshot_dir(d)


def test_open_store_urls(tmp_path):
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    assert open_store(f"file://{tmp_path}").root == tmp_path
    s3 = open_store("s3://bucket/runs/a", endpoint="http://127.0.0.1:9")
    assert (s3.bucket, s3.prefix) == ("bucket", "runs/a/")
    with pytest.raises(InvalidStoreUrl, match="unknown store scheme"):
        open_store("gs://bucket")
    with pytest.raises(InvalidStoreUrl, match="only for s3://"):
        open_store(str(tmp_path), endpoint="http://127.0.0.1:9")


def test_the_command_prints_a_named_error_without_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-m", "psyche_client.snapshots", "get",
                           str(tmp_path / "store"), "0" * 64, str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "no snapshot 0000" in done.stderr and "Traceback" not in done.stderr
