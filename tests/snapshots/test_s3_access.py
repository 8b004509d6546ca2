"""Reads need no credentials on a public-read bucket; writes do (a real S3 server)."""

import pytest

from psyche_client.snapshots import StoreAccessDenied, open_store

from .conftest import make_snapshot, same_files

pytestmark = pytest.mark.slow


def test_anonymous_reads_work_and_anonymous_writes_are_refused(s3_server, s3_bucket, tmp_path):
    writer = open_store(s3_bucket, endpoint=s3_server.endpoint,
                        credentials=s3_server.credentials, progress=False)
    anonymous = open_store(s3_bucket, endpoint=s3_server.endpoint, progress=False)
    snap = make_snapshot(tmp_path / "ck", step=10, model_bytes=1 << 20)
    location = writer.put(snap)

    assert [loc for loc, _ in anonymous.list()] == [location]
    anonymous.get(location, tmp_path / "out")
    assert same_files(snap, tmp_path / "out")

    other = make_snapshot(tmp_path / "ck", step=20, model_bytes=1 << 20)
    before = len(s3_server.requests())
    with pytest.raises(StoreAccessDenied, match="refused an anonymous request"):
        anonymous.put(other)
    refused = [r for r in s3_server.requests()[before:] if r.operation == "s3_PutObject"]
    assert refused and all(r.status == 403 and r.requester == "-" for r in refused)
    assert [loc for loc, _ in anonymous.list()] == [location]
    with pytest.raises(StoreAccessDenied):
        anonymous._delete_manifest(location)
    assert [loc for loc, _ in writer.list()] == [location]


def test_wrong_credentials_are_refused(s3_server, s3_bucket, tmp_path):
    wrong = open_store(s3_bucket, endpoint=s3_server.endpoint,
                       credentials=(s3_server.access_key, "not-the-secret"), progress=False)
    with pytest.raises(StoreAccessDenied, match="refused the credentials"):
        wrong.put(make_snapshot(tmp_path / "ck", step=10, model_bytes=1024))
