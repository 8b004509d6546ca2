"""The data manifest (psyche_client/data/manifest.py): chunk hashes of the token files that the
run spec pins. Providers with it return the same tokens as without, and refuse a changed byte
in the chunk it sits in, a file of another size or one the manifest does not list; over HTTP
every fetch is checked, not only the first. The spec, make_provider, the CLI and create-run's
pinning refuse what they must, by name."""

import hashlib
import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from psyche_client.data.http import HttpDataProvider
from psyche_client.data.http_server import serve_directory
from psyche_client.data.local import LocalDataProvider
from psyche_client.data.manifest import (
    DataHashMismatch,
    ManifestError,
    build_manifest,
    load_manifest,
    parse_manifest,
)
from psyche_client.data.token_files import write_tokens
from psyche_client.training.spec import DataSpec, RunSpec, SpecError

SEQ, CHUNK = 16, 256  # 8 sequences of u16 tokens per chunk
SEED = bytes(range(32))


@pytest.fixture
def data(tmp_path):
    """tmp_path/train/{a.bin, b.npy, c.bin}, tmp_path/heldout/a.bin, and their manifest at
    tmp_path/manifest.json: (root, manifest, its sha256)."""
    rng = np.random.default_rng(1)
    for name, n in (("train/a.bin", 1000), ("train/b.npy", 333), ("train/c.bin", 70),
                    ("heldout/a.bin", 200)):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        write_tokens(tmp_path / name, rng.integers(0, 60000, n), 2)
    paths = sorted(tmp_path.glob("*/*.*"))
    m = build_manifest(tmp_path, paths, CHUNK)
    (tmp_path / "manifest.json").write_bytes(m.to_bytes())
    return tmp_path, m, m.sha256()


def flip(path, offset):
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 1
    path.write_bytes(bytes(raw))


def test_the_manifest_is_canonical_and_names_files_relative_to_itself(data):
    root, m, digest = data
    assert sorted(m.files) == ["heldout/a.bin", "train/a.bin", "train/b.npy", "train/c.bin"]
    assert m.files["train/a.bin"].size == 2000 and len(m.files["train/a.bin"].chunks) == 8
    again = build_manifest(root, sorted(root.glob("*/*.*"), reverse=True), CHUNK)
    assert again.to_bytes() == m.to_bytes()  # order of the arguments does not matter
    assert parse_manifest(m.to_bytes(), digest) == m
    assert build_manifest(root, sorted(root.glob("*/*.*")), CHUNK * 2).sha256() != digest
    flip(root / "train/c.bin", 0)
    assert build_manifest(root, sorted(root.glob("*/*.*")), CHUNK).sha256() != digest
    with pytest.raises(ManifestError, match="outside"):
        build_manifest(root / "train", [root / "heldout/a.bin"], CHUNK)


def test_a_manifest_is_refused_unless_it_hashes_to_the_runs(data):
    root, m, digest = data
    with pytest.raises(DataHashMismatch, match="not the run's"):
        parse_manifest(m.to_bytes() + b" ", digest)
    with pytest.raises(DataHashMismatch):
        load_manifest(str(root / "manifest.json"), "00" * 32)
    assert load_manifest(str(root / "manifest.json"), digest) == m
    for raw, why in [(b"[]", "malformed"), (b'{"format": "x"}', "not a data manifest"),
                     (json.dumps({"format": "psyche-data-manifest/1", "chunk_bytes": 256,
                                  "files": {"a": {"size": 300, "chunks": "00" * 32}}}).encode(),
                      "1 chunk hashes for 300 bytes")]:
        with pytest.raises(ManifestError, match=why):
            parse_manifest(raw)
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(str(root / "nope.json"), digest)


def test_local_files_read_the_same_and_a_changed_byte_is_refused_in_its_chunk(data):
    root, m, _ = data
    where = str(root / "manifest.json")
    plain = LocalDataProvider(root / "train", 2, SEQ, SEED)
    checked = LocalDataProvider(root / "train", 2, SEQ, SEED, m, where)
    n = plain.index.num_sequences
    assert np.array_equal(checked.get_samples(0, n - 1), plain.get_samples(0, n - 1))
    # a byte of a.bin's third chunk (tokens 256..383) changes: the sequences there are
    # refused, the others still read (a fresh provider: a checked chunk is not hashed again)
    flip(root / "train/a.bin", 2 * CHUNK + 5)
    unshuffled = LocalDataProvider(root / "train", 2, SEQ, manifest=m, manifest_location=where)
    with pytest.raises(DataHashMismatch, match=r"a\.bin: bytes 512\.\.768 .*chunk 2"):
        unshuffled.get_samples(16, 16)  # tokens 256..271
    assert np.array_equal(unshuffled.get_samples(0, 15),
                          LocalDataProvider(root / "train", 2, SEQ).get_samples(0, 15))
    # the .npy file: its tokens start after the header, and they check too
    flip(root / "train/b.npy", 200)
    with pytest.raises(DataHashMismatch, match=r"b\.npy"):
        LocalDataProvider(root / "train", 2, SEQ, manifest=m,
                          manifest_location=where).get_samples(62, 63)


def test_local_files_of_another_size_or_not_listed_are_refused_at_start(data):
    root, m, _ = data
    where = str(root / "manifest.json")
    with open(root / "train/c.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(DataHashMismatch, match="142 bytes, but the run's data manifest says "
                                               "train/c.bin has 140"):
        LocalDataProvider(root / "train", 2, SEQ, manifest=m, manifest_location=where)
    (root / "train/c.bin").unlink()
    write_tokens(root / "train/d.bin", np.arange(64), 2)
    with pytest.raises(ManifestError, match="train/d.bin is not in the data manifest"):
        LocalDataProvider(root / "train", 2, SEQ, manifest=m, manifest_location=where)


def test_http_reads_whole_chunks_and_checks_every_fetch(data):
    root, m, _ = data
    (root / "train/b.npy").unlink()  # HTTP serves raw token streams
    m = build_manifest(root, sorted(root.glob("*/*.bin")), CHUNK)
    server = serve_directory(root)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        urls = [f"{base}/train/a.bin", f"{base}/train/c.bin"]
        plain = HttpDataProvider(urls, 2, SEQ, SEED)
        checked = HttpDataProvider(urls, 2, SEQ, SEED, m, f"{base}/manifest.json")
        for start, end in [(0, 0), (3, 9), (40, 65)]:
            assert np.array_equal(checked.get_samples(start, end), plain.get_samples(start, end))
        unshuffled = HttpDataProvider(urls, 2, SEQ, manifest=m,
                                      manifest_location=f"{base}/manifest.json")
        assert unshuffled.get_samples(0, 0).shape == (1, SEQ)
        flip(root / "train/a.bin", 3)  # the server now serves a changed first chunk
        with pytest.raises(DataHashMismatch, match="chunk 0"):
            unshuffled.get_samples(0, 0)  # read and checked before: checked again
        assert plain.get_samples(0, 0).shape == (1, SEQ)  # without a manifest, taken as is
        with pytest.raises(ManifestError, match="not under"):
            HttpDataProvider(urls, 2, SEQ, manifest=m, manifest_location=f"{base}/x/m.json")
    finally:
        server.shutdown()
        server.server_close()


def test_the_spec_names_a_manifest_with_its_hash_for_token_files_only():
    h = "ab" * 32
    assert DataSpec(kind="http", urls=("http://h/a.bin",), manifest="http://h/manifest.json",
                    manifest_sha256=h).validate()
    assert DataSpec(kind="local", dir="d", manifest="d/manifest.json").validate()  # pinned later
    for kw, why in [(dict(kind="local", dir="d", manifest_sha256=h), "without data.manifest"),
                    (dict(kind="server", address="h:1", manifest="m"), "kind"),
                    (dict(kind="http", urls=("http://h/a",), manifest="m.json"), "URL"),
                    (dict(kind="local", dir="d", manifest="http://h/m"), "path"),
                    (dict(kind="local", dir="d", manifest="m", manifest_sha256="xy"), "64 hex")]:
        with pytest.raises(SpecError, match=why):
            DataSpec(**kw).validate()


def test_make_provider_refuses_an_unpinned_or_other_manifest(data, monkeypatch):
    from psyche_client.training.trainer import make_provider

    root, m, digest = data
    d = DataSpec(kind="local", dir=str(root / "train"), heldout_dir=str(root / "heldout"),
                 manifest=str(root / "manifest.json"))
    with pytest.raises(ManifestError, match="without its hash"):
        make_provider(RunSpec(data=d), None, None, SEQ)
    with pytest.raises(DataHashMismatch):
        make_provider(RunSpec(data=replace(d, manifest_sha256="00" * 32)), None, None, SEQ)
    spec = RunSpec(data=replace(d, manifest_sha256=digest))
    train = make_provider(spec, None, None, SEQ)
    heldout = make_provider(spec, None, None, SEQ, heldout=True)
    assert train.checks and heldout.checks
    assert heldout.get_samples(0, 11).shape == (12, SEQ)
    # the trainer loads the manifest once for both providers (data_pinning, then pinned=)
    from psyche_client.training import trainer
    loads = []
    monkeypatch.setattr(trainer, "load_manifest",
                        lambda *a: loads.append(a) or load_manifest(*a))
    pinned = trainer.data_pinning(spec)
    for kind in (False, True):
        assert make_provider(spec, None, None, SEQ, heldout=kind, pinned=pinned).checks
    assert len(loads) == 1


def test_cli_tokenize_writes_a_manifest_and_manifest_rebuilds_it(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 400)

    def cli(*a):
        return subprocess.run([sys.executable, "-m", "psyche_client.cli.data", *a],
                              capture_output=True, text=True, check=True)
    out = cli("tokenize", "--input", str(corpus), "--out", str(tmp_path / "d"),
              "--tokenizer", "bytes").stdout
    raw = (tmp_path / "d/manifest.json").read_bytes()
    assert f"sha256 {hashlib.sha256(raw).hexdigest()}" in out
    assert sorted(parse_manifest(raw).files) == ["heldout/tokens-000.bin", "train/tokens-000.bin"]
    again = cli("manifest", str(tmp_path / "d"), "--chunk-kib", "64")
    assert f"sha256 {hashlib.sha256(raw).hexdigest()}" in again.stdout  # same files, same hash
    assert "hashed train/tokens-000.bin" in again.stderr
    small = cli("manifest", str(tmp_path / "d"), str(tmp_path / "d/train"), "--chunk-kib", "1")
    m = parse_manifest((tmp_path / "d/manifest.json").read_bytes())
    assert list(m.files) == ["train/tokens-000.bin"] and m.chunk_bytes == 1024
    assert hashlib.sha256(m.to_bytes()).hexdigest() in small.stdout
    (tmp_path / "empty").mkdir()
    bad = subprocess.run([sys.executable, "-m", "psyche_client.cli.data", "manifest",
                          str(tmp_path / "empty")], capture_output=True, text=True)
    assert bad.returncode == 2 and "no token files" in bad.stderr, bad.stderr


def test_create_run_pins_the_manifests_hash_and_refuses_another(data, capsys):
    from psyche_client.cli.solana_admin import pin_data

    root, _, digest = data
    d = DataSpec(kind="local", dir=str(root / "train"), manifest=str(root / "manifest.json"))
    assert pin_data("state.toml", RunSpec(data=d)).data.manifest_sha256 == digest
    assert "pinned in the run spec" in capsys.readouterr().err
    given = RunSpec(data=replace(d, manifest_sha256=digest))
    assert pin_data("state.toml", given) is given
    with pytest.raises(SystemExit) as e:
        pin_data("state.toml", RunSpec(data=replace(d, manifest_sha256="00" * 32)))
    assert e.value.code == 2 and "not the run's" in capsys.readouterr().err
    # unreadable here: taken as given with a warning when pinned, refused when not
    far = replace(d, manifest=str(root / "elsewhere.json"))
    assert pin_data("s", RunSpec(data=replace(far, manifest_sha256=digest))).data == \
        replace(far, manifest_sha256=digest)
    assert "taken as given" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pin_data("s", RunSpec(data=far))
    assert "give its hash" in capsys.readouterr().err
    unpinned = RunSpec(data=DataSpec(kind="local", dir="d"))
    assert pin_data("s", unpinned) is unpinned
    assert "names no data manifest" in capsys.readouterr().err


def test_manifest_downloads_are_bounded_and_http_errors_named(tmp_path, monkeypatch):
    from psyche_client.data import manifest
    from psyche_client.data.fetch import get_bytes
    from psyche_client.data.provider import DataError

    (tmp_path / "m.json").write_bytes(b"x" * 100)
    server = serve_directory(tmp_path)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert get_bytes(f"{base}/m.json", 100) == b"x" * 100
        with pytest.raises(DataError, match="over 99 bytes"):
            get_bytes(f"{base}/m.json", 99)
        with pytest.raises(DataError, match="HTTP 404"):
            load_manifest(f"{base}/nope.json", "00" * 32)
        monkeypatch.setattr(manifest, "MAX_MANIFEST_BYTES", 50)
        with pytest.raises(ManifestError, match="over 50 bytes") as e:
            manifest.read_manifest(f"{base}/m.json")
        assert not isinstance(e.value, manifest.ManifestUnreachable)  # read, and refused
    finally:
        server.shutdown()
        server.server_close()
