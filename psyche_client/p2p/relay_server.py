"""A local iroh relay (the crates.io crate iroh-relay at the version the binding speaks, built
once by scripts/relay) for the tests, the benchmarks and trying a run by hand. No iroh import:
it only starts and stops the server process."""

import contextlib
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from ..local_servers import built_binary, started, stop
from .errors import P2PError


class RelayServerError(P2PError):
    """The local relay could not be built or started."""


def find_binary() -> Path:
    """$PSYCHE_RELAY_BIN if it exists, else the binary scripts/relay builds (once; a cached
    build is returned at once)."""
    return built_binary("relay", "PSYCHE_RELAY_BIN", RelayServerError)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _healthy(url: str, netns=None) -> bool:
    if netns is not None:  # asked from inside the namespace that serves it
        probe = ("import sys, urllib.request\ntry:\n    urllib.request.urlopen(sys.argv[1], "
                 "timeout=1.0)\nexcept OSError:\n    sys.exit(1)")
        return subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", probe,
                               f"{url}/healthz"], capture_output=True).returncode == 0
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1.0) as r:
            return r.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def start_relay(host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0, netns=None):
    """Yields the URL of a relay serving plain HTTP on host:port (port 0: a free one); stops it
    at exit. The same settings as scripts/relay: no QUIC address discovery, no metrics port.
    `netns`: the network namespace to run it in (then give `port`)."""
    binary = find_binary()
    prefix = ["ip", "netns", "exec", netns] if netns else []
    with tempfile.TemporaryDirectory(prefix="psyche-relay-") as tmp:
        output = ""
        for _ in range(3):  # another process can take the free port before the relay binds it
            bound = port or _free_port(host)
            url = f"http://{host}:{bound}"
            config = Path(tmp) / f"relay-{bound}.toml"
            config.write_text(f'enable_relay = true\nhttp_bind_addr = "{host}:{bound}"\n'
                              "enable_quic_addr_discovery = false\nenable_metrics = false\n")
            log = Path(tmp) / f"relay-{bound}.log"
            with open(log, "wb") as sink:
                proc = subprocess.Popen([*prefix, str(binary), "--dev", "-c", str(config)],
                                        stdout=sink, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
            if started(proc, lambda: _healthy(url, netns), timeout):
                try:
                    yield url
                finally:
                    stop(proc)
                return
            proc.kill()
            proc.wait()
            output = log.read_text(errors="replace")[-4000:]
            if port:
                break
        raise RelayServerError(f"the relay ({binary}) did not start within {timeout:.0f} s:\n"
                               f"{output}")
