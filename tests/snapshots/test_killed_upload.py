"""A checkpointer killed mid-upload (SIGKILL during a multipart upload to a real S3 server):
the previous snapshot stays listed and downloads with verified hashes, and the next put of the
interrupted snapshot completes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from psyche_client.snapshots import SnapshotNotFound, open_store, verify_snapshot_dir

from .conftest import make_snapshot, same_files

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
MIB = 1 << 20
DEADLINE = 120.0  # bounds a hang only: the events come within seconds


def blob_requests(server, sha256, operation):
    return [r for r in server.requests() if r.operation == operation and r.key.endswith(sha256)]


def test_a_checkpointer_killed_mid_upload(s3_server, s3_bucket, tmp_path):
    env = {**os.environ, "PSYCHE_S3_ACCESS_KEY": s3_server.access_key,
           "PSYCHE_S3_SECRET_KEY": s3_server.secret_key}
    writer = open_store(s3_bucket, endpoint=s3_server.endpoint,
                        credentials=s3_server.credentials, progress=False)
    previous = make_snapshot(tmp_path / "ck", step=10, model_bytes=6 * MIB)
    previous_location = writer.put(previous)

    # the next snapshot: 30 MiB, six 5 MiB parts two at a time; held after three parts' bytes,
    # so at least one part has been received whole while the upload cannot complete
    following = make_snapshot(tmp_path / "ck", step=20, model_bytes=30 * MIB)
    model = verify_snapshot_dir(following).files["model.safetensors"]
    marker = tmp_path / "held"
    proc = subprocess.Popen([sys.executable, str(HERE / "hanging_upload.py"), s3_bucket,
                             s3_server.endpoint, str(following), str(marker), str(15 * MIB)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + DEADLINE
        while not (marker.exists() and any(
                r.status == 200 for r in blob_requests(s3_server, model.sha256, "s3_UploadPart"))):
            assert proc.poll() is None, f"the uploader exited early:\n{proc.stdout.read()}"
            assert time.monotonic() < deadline, "the upload never reached its held point"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()

    # killed mid-multipart: parts arrived, the upload was never completed, no manifest
    assert blob_requests(s3_server, model.sha256, "s3_CreateMultipartUpload")
    assert not blob_requests(s3_server, model.sha256, "s3_CompleteMultipartUpload")
    following_location = verify_snapshot_dir(following).location
    reader = open_store(s3_bucket, endpoint=s3_server.endpoint, progress=False)  # anonymous
    with pytest.raises(SnapshotNotFound):
        reader.manifest(following_location)

    # the previous snapshot stays usable
    assert [loc for loc, _ in reader.list()] == [previous_location]
    reader.get(previous_location, tmp_path / "previous")
    assert same_files(previous, tmp_path / "previous")

    # and the next checkpointer run (the command a person would use) completes the snapshot
    done = subprocess.run([sys.executable, "-m", "psyche_client.snapshots", "put", s3_bucket,
                           str(following), "--endpoint", s3_server.endpoint,
                           "--part-size-mib", "5"], env=env, capture_output=True, text=True,
                          timeout=DEADLINE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == following_location
    assert [m.step for _, m in reader.list()] == [10, 20]
    reader.get(following_location, tmp_path / "following")
    assert same_files(following, tmp_path / "following")
