"""The chain end-to-end run against Solana's own validator: solana-test-validator (agave 2.3.13,
built from crates.io by scripts/solana-tools) with the program's SBF build deployed by
`solana program deploy` (`scripts/localnet --validator`), then three clients train two epochs
on it, as they do on psyche-localnet (test_chain_e2e.py). About 70 s once the tools are built.

Opt-in: the tools' first build takes most of an hour, so this runs only with
PSYCHE_VALIDATOR_TESTS=1 (and the tools built), never in scripts/test:

    scripts/solana-tools && PSYCHE_VALIDATOR_TESTS=1 python -m pytest tests/chain/test_validator.py
"""
import collections
import os
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from .localnet import Localnet
from .test_chain_e2e import three_clients_train_two_epochs

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"scripts/localnet: ready: program (\S+) rpc (\S+) pubsub (\S+)")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("PSYCHE_VALIDATOR_TESTS") != "1",
                       reason="opt-in: PSYCHE_VALIDATOR_TESTS=1 (after scripts/solana-tools)"),
]


def free_port_pair() -> int:
    """A port P with P + 1 free too (the validator's RPC and PubSub)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two adjacent free ports")


@pytest.fixture
def validator(tmp_path):
    tools = subprocess.run([str(ROOT / "scripts" / "solana-tools"), "--check",
                            "solana-test-validator", "solana", "solana-keygen"],
                           capture_output=True, text=True)
    if tools.returncode != 0:
        pytest.fail(f"Solana's tools are not built: {tools.stderr.strip()} (scripts/solana-tools)")
    port = free_port_pair()
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "localnet"), "--validator", "--rpc-port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PSYCHE_LEDGER": str(tmp_path / "ledger")})
    output = collections.deque(maxlen=200)
    found, ready = [], threading.Event()

    def drain():
        for line in proc.stdout:
            output.append(line.rstrip("\n"))
            m = READY.search(line)
            if m and not found:
                found.append(m.groups())
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not ready.wait(600) or not found:
            pytest.fail("the validator did not come up with the program deployed:\n"
                        + "\n".join(output))
        program_id, rpc_url, ws_url = found[0]
        yield Localnet(rpc_url, ws_url, Path("solana-test-validator"), program_id, proc, output)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.timeout(1500)
def test_three_clients_train_two_epochs_on_solana_test_validator(validator, tmp_path,
                                                                  iroh_relay):
    assert any("deployed" in line for line in validator.output)
    three_clients_train_two_epochs(validator, tmp_path, iroh_relay)
