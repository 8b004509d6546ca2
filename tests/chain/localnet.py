"""psyche-localnet for tests: started on free ports, ready once it prints its ready line, killed
afterwards. `start_localnet()` is a context manager; conftest.py wraps it as the `localnet`
fixture."""

import collections
import contextlib
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from psyche_client.chain.localnet import LocalnetError, find_binary, parse_ready
from psyche_client.local_servers import stop

START_TIMEOUT = 60.0


@dataclass
class Localnet:
    rpc_url: str
    ws_url: str
    binary: Path
    program_id: str
    process: subprocess.Popen = field(repr=False)
    output: collections.deque = field(repr=False)  # the last lines it printed, for diagnostics


# the Rust sources the binary is built from (what cargo's own fingerprints follow): one changed
# after the build means the tests would run old code
SOURCES = ("localnet/src", "programs/psyche-coordinator/src",
           "programs/psyche-coordinator/core/src", "patches")


def newest_source(root: Path):
    """(mtime, path) of the newest Rust source the binary is built from."""
    return max((f.stat().st_mtime, f) for s in SOURCES for f in (root / s).rglob("*.rs"))


def localnet_binary() -> Path:
    """The built binary; built now if missing (an existing one is used as it is: a build per
    session could wait on another build's lock). Skips when it cannot be built here; fails,
    saying what to run, when a source changed after it was built."""
    try:
        binary = find_binary(rebuild=False)
    except LocalnetError as e:
        if shutil.which("cargo") is None:
            pytest.skip(str(e))
        pytest.fail(str(e))
    newest, path = newest_source(Path(__file__).resolve().parents[2])
    if binary.stat().st_mtime < newest and "PSYCHE_LOCALNET" not in os.environ:
        pytest.fail(f"{binary} is older than {path}: the tests would run old code; run "
                    "`cargo build -p psyche-localnet` (scripts/test does)")
    return binary


@contextlib.contextmanager
def start_localnet(*extra_args, timeout: float = START_TIMEOUT, netns=None, rpc_port=0,
                   ws_port=0):
    """Yields a Localnet on free ports, or the given ones (extra_args: e.g. "--airdrop",
    "PUBKEY=SOL"; "--bind-address", IP). `netns`: the network namespace to run it in."""
    binary = localnet_binary()
    prefix = ["ip", "netns", "exec", netns] if netns else []
    proc = subprocess.Popen([*prefix, str(binary), "--rpc-port", str(rpc_port), "--ws-port",
                             str(ws_port), *extra_args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    output = collections.deque(maxlen=200)
    ready, found = threading.Event(), []

    def drain():  # keeps reading: the program's msg! lines would otherwise fill the pipe
        for line in proc.stdout:
            output.append(line.rstrip("\n"))
            ready_line = parse_ready(line)
            if ready_line and not found:
                found.append(ready_line)
                ready.set()
        ready.set()  # exited before (or after) being ready

    reader = threading.Thread(target=drain, name="localnet-output", daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout) or not found:
            tail = "\n".join(output)
            pytest.fail(f"psyche-localnet did not become ready within {timeout:.0f} s "
                        f"(exit code {proc.poll()}):\n{tail}")
        program_id, rpc_url, ws_url = found[0]
        yield Localnet(rpc_url, ws_url, binary, program_id, proc, output)
    finally:
        stop(proc)
        reader.join(timeout=5)
