"""What the local servers for tests and benchmarks share (the S3 server of snapshots/s3_server,
the iroh relay of p2p/relay_server): a binary that a script in scripts/ builds once and caches,
and stopping a server process. Imports nothing of the package."""

import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def built_binary(script: str, env_var: str, error: type) -> Path:
    """$`env_var` if that file exists, else what `scripts/<script> --build` prints (it builds
    once; a cached build comes back at once). Raises `error` when neither works."""
    env = os.environ.get(env_var)
    if env and Path(env).is_file():
        return Path(env)
    path = REPO / "scripts" / script
    if not path.exists():
        raise error(f"no {script} binary: set {env_var}, or run from a clone "
                    f"(scripts/{script} builds it)")
    done = subprocess.run([str(path), "--build"], capture_output=True, text=True)
    found = Path(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    if done.returncode != 0 or found is None or not found.is_file():
        raise error(f"scripts/{script} --build failed:\n{done.stderr.strip()}")
    return found


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def started(proc: subprocess.Popen, ready, timeout: float) -> bool:
    """Whether `proc` is running and `ready()` within `timeout` seconds (polled every 50 ms)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and not ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.poll() is None and ready()
