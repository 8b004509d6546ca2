"""Finding, building and starting the `psyche-localnet` binary (localnet/ in this repository)."""

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)

READY = re.compile(r"psyche-localnet: ready: program (\S+) rpc (\S+) pubsub (\S+)")


class LocalnetError(RuntimeError):
    pass


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache/psyche/cargo-target"))


def find_binary(rebuild: bool = True, profile: str = "debug") -> Path:
    """$PSYCHE_LOCALNET, else the workspace's build (`profile`: debug, the one the tests and
    scripts use, or release, for benchmarks). With `rebuild`, cargo runs first
    (quick when nothing changed; a stale binary is rebuilt); without it an existing binary is
    used as it is, and only a missing one is built."""
    if os.environ.get("PSYCHE_LOCALNET"):
        return Path(os.environ["PSYCHE_LOCALNET"])
    binary = target_dir() / profile / "psyche-localnet"
    if binary.exists() and not rebuild:
        return binary
    if not (REPO / "localnet" / "Cargo.toml").exists() or shutil.which("cargo") is None:
        if binary.exists():
            return binary
        raise LocalnetError("psyche-localnet is not built and cargo is not available "
                            "(install Rust, or set PSYCHE_LOCALNET to the binary)")
    if not binary.exists():
        log.info("building psyche-localnet (the first time takes a few minutes)")
    release = ["--release"] if profile == "release" else []
    done = subprocess.run(["cargo", "build", "-q", *release, "-p", "psyche-localnet"], cwd=REPO,
                          env={**os.environ, "CARGO_TARGET_DIR": str(target_dir())})
    if done.returncode != 0 or not binary.exists():
        raise LocalnetError("cargo build -p psyche-localnet failed")
    return binary


def command(binary, rpc_port: int = 0, ws_port: int = 0, host: str = "127.0.0.1") -> list:
    return [str(binary), "--bind-address", host, "--rpc-port", str(rpc_port),
            "--ws-port", str(ws_port)]


def parse_ready(line: str):
    """(program id, rpc url, ws url) from the binary's ready line, or None."""
    m = READY.search(line)
    return m.groups() if m else None
