"""The README's main command: a server and 3 clients run a local run to its end."""

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_local_testnet_runs_two_epochs_to_the_end():
    out = subprocess.run(
        [sys.executable, "-m", "psyche_client.cli.local_testnet", "start", "--num-clients", "3",
         "--config-path", str(ROOT / "config/local"), "--server-port", "0",
         "--dummy-training-delay-secs", "0.3", "--timeout", "400"],
        capture_output=True, text=True, timeout=480, cwd=ROOT)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    phases = re.findall(r"\[  server\] \S+ phase: (\w+) -> (\w+) \(epoch (\d+)", text)
    assert ("Cooldown", "WaitingForMembers", "1") in phases, text[-4000:]
    assert phases[-1][1] == "Finished" and int(phases[-1][2]) >= 2
    trained = set(re.findall(r"\[client-(\d)\] .* trained step", text))
    assert trained == {"1", "2", "3"}


def test_local_testnet_reports_a_server_that_cannot_start():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "psyche_client.cli.local_testnet", "start", "--num-clients",
             "1", "--config-path", str(ROOT / "config/local"), "--server-port", str(port)],
            capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert out.returncode == 1
    assert "cannot listen" in out.stdout and "server did not start" in out.stdout


def test_local_testnet_on_a_chain_needs_no_shared_directory():
    """`--chain`: psyche-localnet and 3 clients that find each other by their keys on chain at
    the loopback ports they are told (--p2p-peer): no relay, no peer directory."""
    from psyche_client.chain.localnet import LocalnetError, find_binary
    try:
        find_binary()
    except LocalnetError as e:
        pytest.skip(f"psyche-localnet is not built: {e}")
    out = subprocess.run(
        [sys.executable, "-m", "psyche_client.cli.local_testnet", "start", "--num-clients", "3",
         "--config-path", str(ROOT / "config/local"), "--chain",
         "--dummy-training-delay-secs", "0.3", "--timeout", "400"],
        capture_output=True, text=True, timeout=480, cwd=ROOT)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert set(re.findall(r"\[client-(\d)\] .* run finished", text)) == {"1", "2", "3"}
    # each client reached both others directly, and none was handed a peer directory
    paths = re.findall(r"\[client-\d\] .* p2p paths: (\w+)=direct, (\w+)=direct", text)
    assert len(paths) == 3, text[-4000:]
    assert "peer-dir" not in text
