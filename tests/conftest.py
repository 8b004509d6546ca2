import os
import subprocess
import sys

import pytest

# Clients bind every interface on a fixed port by default (a contributor's machine); the tests
# run many on one machine: loopback and a free port each, for every client process they start.
os.environ.setdefault("PSYCHE_BIND_P2P_HOST", "127.0.0.1")
os.environ.setdefault("PSYCHE_BIND_P2P_PORT", "0")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """Token files of real text (the standard library's docstrings, one token per byte):
    data_dir/train and data_dir/heldout, sequences of 128 tokens. Built once per session."""
    d = tmp_path_factory.mktemp("data")
    def run(*a):
        subprocess.run([sys.executable, "-m", "psyche_client.cli.data", *a],
                       check=True, capture_output=True, text=True)
    run("build-corpus", "--out", str(d / "corpus.txt"), "--max-mb", "2")
    run("tokenize", "--input", str(d / "corpus.txt"), "--out", str(d), "--tokenizer", "bytes",
        "--seq-len", "128")
    return d


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One real S3-compatible server (versitygw, built once by scripts/s3-server) for the
    session, on a free loopback port with a temporary data directory; stopped at the end.
    .endpoint, .credentials (the root account's), .requests() (its access log). Give each test
    its own bucket (`s3_bucket` in tests/snapshots/conftest.py)."""
    from psyche_client.snapshots.s3_server import S3ServerError, find_binary, start_server
    try:
        find_binary()
    except S3ServerError as e:
        pytest.skip(f"the S3 server cannot be built here: {e}")
    with start_server(tmp_path_factory.mktemp("s3-server")) as server:
        yield server


@pytest.fixture(scope="session")
def iroh_relay():
    """One iroh relay (scripts/relay's iroh-relay 1.4.1) for the session, plain HTTP on a free
    loopback port: its URL. Clients given it as --iroh-relay reach each other by key alone.
    Skips only where it cannot be built for want of cargo."""
    import shutil

    from psyche_client.p2p.relay_server import RelayServerError, find_binary, start_relay
    try:
        find_binary()
    except RelayServerError as e:
        if shutil.which("cargo") is None:
            pytest.skip(f"the iroh relay cannot be built here: {e}")
        pytest.fail(str(e))
    with start_relay() as url:
        yield url


@pytest.fixture
def nat_lab():
    """Network namespaces for the NAT tests (tests/p2p/netlab.py): an internet and home links
    with 50 ms of delay and 1 % loss each way; removed afterwards. Skips only where namespaces
    cannot be made; a missing STUN server (coturn) fails by name."""
    import shutil

    from tests.p2p import netlab
    why = netlab.available()
    if why is not None:
        pytest.skip(f"no network namespaces here: {why}")
    if shutil.which("turnserver") is None:
        pytest.fail("coturn's turnserver is not installed (Debian: apt-get install coturn; "
                    "scripts/test installs it)")
    with netlab.Lab(delay_ms=50, loss_pct=1.0) as lab:
        yield lab
