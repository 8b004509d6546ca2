"""Data providers: local files, HTTP byte ranges and the TCP data server return the same tokens
for the same sequence ids; the shuffle is a permutation; bad requests fail clearly."""

import asyncio
import threading

import numpy as np
import pytest

from psyche_client.data.http import HttpDataProvider
from psyche_client.data.http_server import serve_directory
from psyche_client.data.local import LocalDataProvider
from psyche_client.data.provider import DataError
from psyche_client.data.sequences import FileSpan, SequenceIndex, shuffled_index
from psyche_client.data.tcp import TcpDataProvider
from psyche_client.data.token_files import write_tokens
from psyche_client.data.tokenizer import BpeTokenizer, ByteTokenizer, load_tokenizer
from psyche_client.identity import Identity
from psyche_client.server.data_server import DataServer
from psyche_client.server.state_file import DataConfig

SEQ = 16
SEED = bytes(range(32))


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tokens")
    rng = np.random.default_rng(0)
    # three files of uneven length, one of them .npy; 1000 + 333 + 70 tokens
    write_tokens(d / "a.bin", rng.integers(0, 60000, 1000), 2)
    write_tokens(d / "b.npy", rng.integers(0, 60000, 333), 2)
    write_tokens(d / "c.bin", rng.integers(0, 60000, 70), 2)
    return d


def all_tokens(d):
    return [np.fromfile(d / "a.bin", "<u2"), np.load(d / "b.npy"), np.fromfile(d / "c.bin", "<u2")]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100, 257, 1000, 4099])
def test_shuffle_is_a_permutation(n):
    perm = [shuffled_index(k, n, SEED) for k in range(n)]
    assert sorted(perm) == list(range(n))
    if n > 8:
        assert perm != list(range(n))  # it does move things
    assert [shuffled_index(k, n, bytes(32)) for k in range(n)] == list(range(n))


def test_local_reads_whole_sequences_in_file_order(token_dir):
    p = LocalDataProvider(token_dir, 2, SEQ)
    files = all_tokens(token_dir)
    # 62 + 20 + 4 whole sequences; the tail of each file is never used
    assert p.index.num_sequences == 1000 // SEQ + 333 // SEQ + 70 // SEQ
    rows = p.get_samples(0, p.index.num_sequences - 1)
    expected = np.concatenate([f[:len(f) // SEQ * SEQ].reshape(-1, SEQ) for f in files])
    assert np.array_equal(rows, expected)
    # sequence ids past the end wrap around: epochs over the data
    assert np.array_equal(p.get_samples(p.index.num_sequences, p.index.num_sequences + 2), rows[:3])


def test_shuffled_batches_cover_every_sequence_once(token_dir):
    p = LocalDataProvider(token_dir, 2, SEQ, SEED)
    n = p.index.num_sequences
    rows = p.get_samples(0, n - 1)
    plain = LocalDataProvider(token_dir, 2, SEQ).get_samples(0, n - 1)
    assert not np.array_equal(rows, plain)
    assert sorted(map(bytes, rows.astype("<u2"))) == sorted(map(bytes, plain.astype("<u2")))


class TcpServerThread:
    def __init__(self, cfg, run_id, members):
        self.loop = asyncio.new_event_loop()
        self.server = DataServer(cfg, run_id, authorize=lambda s: s in members)
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self.port = self.loop.run_until_complete(self.server.start("127.0.0.1", 0))
            ready.set()
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_local_http_and_tcp_return_identical_batches(token_dir):
    member = Identity.generate()
    local = LocalDataProvider(token_dir, 2, SEQ, SEED)
    http_server = serve_directory(token_dir)
    tcp = TcpServerThread(DataConfig(token_dir, 2, SEQ, SEED), "run", {member.public})
    try:
        base = f"http://127.0.0.1:{http_server.server_address[1]}"
        # .npy files carry a header; HTTP serves raw token streams, so give it raw copies
        raw = token_dir / "raw"
        raw.mkdir(exist_ok=True)
        for i, arr in enumerate(all_tokens(token_dir)):
            write_tokens(raw / f"{'abc'[i]}.bin", arr, 2)
        http = HttpDataProvider([f"{base}/raw/a.bin", f"{base}/raw/b.bin", f"{base}/raw/c.bin"],
                                2, SEQ, SEED)
        remote = TcpDataProvider(f"127.0.0.1:{tcp.port}", "run", member, SEQ, 2)
        for start, end in [(0, 0), (3, 9), (80, 95), (150, 151)]:
            want = local.get_samples(start, end)
            assert np.array_equal(http.get_samples(start, end), want)
            assert np.array_equal(remote.get_samples(start, end), want)
    finally:
        http_server.shutdown()
        http_server.server_close()
        tcp.stop()


def test_tcp_server_refuses_outsiders_and_bad_requests(token_dir):
    member, outsider = Identity.generate(), Identity.generate()
    tcp = TcpServerThread(DataConfig(token_dir, 2, SEQ, SEED), "run", {member.public})
    addr = f"127.0.0.1:{tcp.port}"
    try:
        with pytest.raises(DataError, match="not a client of this run"):
            TcpDataProvider(addr, "run", outsider, SEQ, 2).get_samples(0, 1)
        with pytest.raises(DataError, match="serves run 'run'"):
            TcpDataProvider(addr, "other", member, SEQ, 2).get_samples(0, 1)
        with pytest.raises(DataError, match="at most"):
            TcpDataProvider(addr, "run", member, SEQ, 2).get_samples(0, 10_000)
        with pytest.raises(DataError, match="expected"):
            TcpDataProvider(addr, "run", member, SEQ + 1, 2).get_samples(0, 1)
        assert TcpDataProvider(addr, "run", member, SEQ, 2).get_samples(0, 1).shape == (2, SEQ)
    finally:
        tcp.stop()


def test_http_errors_are_clear(token_dir, tmp_path):
    server = serve_directory(token_dir)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(DataError, match="404"):
            HttpDataProvider([f"{base}/missing.bin"], 2, SEQ)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(DataError, match="refused"):
        HttpDataProvider([f"{base}/a.bin"], 2, SEQ)  # server gone


def test_bad_token_files_are_rejected(tmp_path):
    (tmp_path / "odd.bin").write_bytes(b"\x01\x02\x03")
    with pytest.raises(DataError, match="whole number"):
        LocalDataProvider(tmp_path, 2, 4)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no token files"):
        LocalDataProvider(tmp_path / "empty", 2, 4)
    with pytest.raises(DataError, match="not a directory"):
        LocalDataProvider(tmp_path / "nothing", 2, 4)
    with pytest.raises(ValueError, match="whole sequence"):
        SequenceIndex([FileSpan("x", 3)], 4)


def test_tokenizers_round_trip(tmp_path):
    text = "The quick brown fox jumps over the lazy dog. " * 50 + "Ünïcödé ✓"
    for tok in (ByteTokenizer(), BpeTokenizer.train(text, 300)):
        ids = tok.encode(text)
        assert max(ids) < tok.vocab_size and tok.decode(ids) == text
        tok.save(tmp_path / "tokenizer.json")
        again = load_tokenizer(tmp_path / "tokenizer.json")
        assert again.encode(text) == ids
    assert len(BpeTokenizer.train(text, 300).encode(text)) < len(text.encode()) / 2
