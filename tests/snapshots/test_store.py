"""The store's contract, on a local directory and on a real S3 server (versitygw on loopback):
put, get, list, prune, write-once blobs, corruption detected, an interrupted get resumed."""

import pytest

from psyche_client.snapshots import (
    LocalStore,
    SnapshotCorrupt,
    SnapshotNotFound,
    open_store,
    verify_snapshot_dir,
)
from psyche_client.snapshots.store import partial_dir

from .conftest import make_snapshot, same_files

MIB = 1 << 20


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])
def store(request, tmp_path):
    if request.param == "local":
        return open_store(str(tmp_path / "store"), progress=False)
    server = request.getfixturevalue("s3_server")
    return open_store(request.getfixturevalue("s3_bucket"), endpoint=server.endpoint,
                      credentials=server.credentials, progress=False, part_size=5 * MIB)


def overwrite_blob(store, sha256, data):
    """Changes a stored blob behind the store's back (a disk or server fault)."""
    if isinstance(store, LocalStore):
        (store.blobs / sha256).write_bytes(data)
    else:
        store.client.put_object(Bucket=store.bucket, Key=store._blob_key(sha256), Body=data)


def test_put_get_list(store, tmp_path):
    snap = make_snapshot(tmp_path / "ck", step=10, model_bytes=12 * MIB)  # multipart on S3
    location = store.put(snap)
    assert location == verify_snapshot_dir(snap).location
    assert [(loc, m.step) for loc, m in store.list()] == [(location, 10)]
    m = store.get(location, tmp_path / "out")
    assert m.step == 10 and same_files(snap, tmp_path / "out")
    assert store.last_transfer.bytes_downloaded == m.total_size
    assert not partial_dir(tmp_path / "out", location).exists()
    with pytest.raises(SnapshotNotFound, match="no snapshot"):
        store.get("0" * 64, tmp_path / "other")


def test_blobs_are_write_once(store, tmp_path):
    a = make_snapshot(tmp_path / "ck", step=10, model_bytes=6 * MIB)
    location = store.put(a)
    sent = store.last_transfer
    assert len(sent.uploaded) == 2 and sent.bytes_uploaded == verify_snapshot_dir(a).total_size
    assert store.put(a) == location
    assert store.last_transfer.uploaded == [] and store.last_transfer.bytes_uploaded == 0
    # the next snapshot shares config.json: only its model goes out
    b = make_snapshot(tmp_path / "ck", step=20, model_bytes=MIB)
    store.put(b)
    model = verify_snapshot_dir(b).files["model.safetensors"]
    assert store.last_transfer.uploaded == [model.sha256]


def test_prune_keeps_the_last_k_by_step_and_their_blobs(store, tmp_path):
    snaps = {step: make_snapshot(tmp_path / "ck", step=step, model_bytes=MIB)
             for step in (30, 10, 20, 40)}
    locations = {step: store.put(d) for step, d in snaps.items()}
    assert [m.step for _, m in store.list()] == [10, 20, 30, 40]
    assert store.prune(2) == [locations[10], locations[20]]
    assert [m.step for _, m in store.list()] == [30, 40]
    kept_blobs = {e.sha256 for s in (30, 40) for e in verify_snapshot_dir(snaps[s]).files.values()}
    assert set(store._blob_locations()) == kept_blobs  # config.json is shared and stays
    with pytest.raises(SnapshotNotFound):
        store.get(locations[10], tmp_path / "gone")
    store.get(locations[30], tmp_path / "out")
    assert same_files(snaps[30], tmp_path / "out")
    assert store.prune(2) == []


def test_a_corrupt_blob_is_detected_on_get(store, tmp_path):
    snap = make_snapshot(tmp_path / "ck", step=10, model_bytes=2 * MIB)
    location = store.put(snap)
    model = verify_snapshot_dir(snap).files["model.safetensors"]
    data = bytearray((snap / "model.safetensors").read_bytes())
    data[MIB] ^= 1  # one flipped bit, same size
    overwrite_blob(store, model.sha256, bytes(data))
    with pytest.raises(SnapshotCorrupt, match=f"blobs/{model.sha256} is corrupt"):
        store.get(location, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def interrupt_after(store, cut: int):
    """The next blob download stops with a dropped connection after `cut` bytes of the model."""
    real = store._stream_blob

    def dropping(sha256, offset, write):
        got = 0

        def counted(chunk):
            nonlocal got
            if got + len(chunk) >= cut:
                write(chunk[: cut - got])
                raise ConnectionResetError("connection dropped mid-download")
            got += len(chunk)
            write(chunk)
        real(sha256, offset, counted if offset == 0 and sha256 == store.target else write)
    store._stream_blob = dropping
    return real


def test_an_interrupted_get_resumes_and_fetches_only_the_rest(store, tmp_path, request):
    snap = make_snapshot(tmp_path / "ck", step=10, model_bytes=8 * MIB)
    location = store.put(snap)
    model = verify_snapshot_dir(snap).files["model.safetensors"]
    store.target, cut = model.sha256, 3 * MIB + 12345
    real = interrupt_after(store, cut)
    dest = tmp_path / "out"
    with pytest.raises(ConnectionResetError):
        store.get(location, dest)
    work = partial_dir(dest, location)
    assert (work / "model.safetensors.part").stat().st_size == cut
    assert (work / "config.json").exists() and not dest.exists()

    store._stream_blob = real
    store.get(location, dest)
    assert same_files(snap, dest) and not work.exists()
    assert store.last_transfer.resumed == ["model.safetensors"]
    assert store.last_transfer.bytes_downloaded == model.size - cut
    if request.node.callspec.id == "s3":  # the server saw a ranged read of the blob
        s3_server = request.getfixturevalue("s3_server")
        ranged = [status for status, method, path in s3_server.responses()
                  if method == "GET" and path.endswith(model.sha256)]
        assert ranged[-1] == 206


def test_a_bad_partial_file_is_fetched_again(store, tmp_path):
    snap = make_snapshot(tmp_path / "ck", step=10, model_bytes=2 * MIB)
    location = store.put(snap)
    dest = tmp_path / "out"
    work = partial_dir(dest, location)
    work.mkdir(parents=True)
    (work / "model.safetensors.part").write_bytes(b"not the model's first bytes")
    store.get(location, dest)
    assert same_files(snap, dest)


def test_a_put_of_a_tampered_snapshot_fails_and_leaves_nothing(store, tmp_path):
    snap = make_snapshot(tmp_path / "ck", step=10, model_bytes=6 * MIB)
    model = verify_snapshot_dir(snap).files["model.safetensors"]
    data = bytearray((snap / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (snap / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(SnapshotCorrupt, match="does not match its manifest"):
        store.put(snap)
    assert store.list() == []
    assert model.sha256 not in store._blob_locations()


def test_a_bad_manifest_does_not_hide_the_good_snapshots(store, tmp_path):
    # anyone with write access to a shared store could drop junk where manifests live
    good = store.put(make_snapshot(tmp_path / "ck", step=10, model_bytes=1024))
    store._put_manifest("ab" * 32, b"not a manifest")  # does not hash to its location
    assert [loc for loc, _ in store.list()] == [good]
