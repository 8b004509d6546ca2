"""Real processes on loopback: a server, clients, and an observer that watches states."""

import asyncio
import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import tomli_w

from psyche_client.backends.centralized import CentralizedBackend
from psyche_client.identity import Identity

LISTEN = re.compile(r"listening on ws://127\.0\.0\.1:(\d+)")

# a client process that imports what it needs (torch, the model code: tens of seconds on a
# loaded machine), then waits for a line on stdin before it runs the client command
HELD_CLIENT = """
import sys
from psyche_client.cli.client import main
from psyche_client.training.model import load_model_code
load_model_code()
sys.stdin.readline()
main()
"""

FAST_CONFIG = dict(warmup_time=3, cooldown_time=1, max_round_train_time=4, round_witness_time=1,
                   epoch_time=8, total_steps=1000, max_seq_len=64, min_clients=2,
                   init_min_clients=3, witness_nodes=2, global_batch_size_start=6,
                   global_batch_size_end=6, waiting_for_members_extra_time=1)


def write_state(tmp: Path, run_id="itest", **overrides) -> Path:
    cfg = {**FAST_CONFIG, **overrides}
    path = tmp / "state.toml"
    path.write_text(tomli_w.dumps({"run_id": run_id, "run_seed": 7, "config": cfg}))
    return path


class Proc:
    """A child process whose output lines are collected in the background."""

    def __init__(self, name, cmd, stdin=None):
        self.name = name
        self.lines = []
        self.p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for raw in self.p.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip())

    def wait_line(self, pattern, timeout=120):
        rx = re.compile(pattern)
        end = time.time() + timeout
        while time.time() < end:
            for ln in list(self.lines):
                m = rx.search(ln)
                if m:
                    return m
            if self.p.poll() is not None and not self._t.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no line matching {pattern!r}:\n" + self.output())

    def release(self):
        """Let a held client (Cluster.start_client(held=True)) run."""
        self.p.stdin.write(b"go\n")
        self.p.stdin.flush()

    def output(self):
        return "\n".join(self.lines[-80:])

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        self.p.wait(10)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()


_buckets = itertools.count()


def public_bucket(s3_server, monkeypatch, name: str, prefix: str = "run") -> str:
    """A fresh public-read bucket <name>-<pid>-<n> on the session's S3 server (clients download
    anonymously); the client processes get the write credentials through the environment.
    Returns the run's store URL, s3://<bucket>/<prefix>."""
    from psyche_client.snapshots import open_store
    bucket = f"{name}-{os.getpid()}-{next(_buckets)}"
    open_store(f"s3://{bucket}", endpoint=s3_server.endpoint, credentials=s3_server.credentials,
               progress=False).create_bucket(public_read=True)
    monkeypatch.setenv("PSYCHE_S3_ACCESS_KEY", s3_server.access_key)
    monkeypatch.setenv("PSYCHE_S3_SECRET_KEY", s3_server.secret_key)
    return f"s3://{bucket}/{prefix}"


def stop_keeping_logs(procs: dict, tmp: Path) -> None:
    """Stop every process of {key: Proc}, write each one's whole output to tmp/<key>-<name>.log
    and print its tail (pytest shows it only when the test fails)."""
    for p in procs.values():
        p.stop()
    for n, p in procs.items():
        (tmp / f"{n}-{p.name}.log").write_text("\n".join(p.lines) + "\n")
        print(f"== {p.name}\n{p.output()}")


class Cluster:
    def __init__(self, tmp: Path, state_path: Path, server_args=()):
        self.tmp, self.state_path, self.server_args = tmp, state_path, list(server_args)
        self.procs = []
        self.port = 0
        self.server = None
        self.clients = {}

    def start_server(self, port=0):
        cmd = [sys.executable, "-m", "psyche_client.cli.server", "run", "--state",
               str(self.state_path), "--server-port", str(port), "--tui", "false",
               "--tick-interval", "0.2", *self.server_args]
        self.server = Proc("server", cmd)
        self.procs.append(self.server)
        self.port = int(self.server.wait_line(LISTEN.pattern).group(1))
        return self.server

    def start_client(self, n, delay=0.3, extra=(), held=False):
        """Client n's process. `held`: it starts now but joins only on its release(), so that
        its start-up, slow on a loaded machine, is not counted in a run's time."""
        key = self.tmp / f"client-{n}.key"
        if not key.exists():
            Identity.generate().save(key)
        start = ["-c", HELD_CLIENT] if held else ["-m", "psyche_client.cli.client"]
        cmd = [sys.executable, *start, "train", "--run-id",
               self.run_id, "--server-addr", f"127.0.0.1:{self.port}",
               "--identity-secret-key-path", str(key), "--dummy-training-delay-secs", str(delay),
               *extra]
        proc = Proc(f"client-{n}", cmd, subprocess.PIPE if held else None)
        self.procs.append(proc)
        self.clients[n] = proc
        return proc

    def pause(self):
        """The operator pauses the run (the server's SIGUSR1)."""
        self.server.p.send_signal(signal.SIGUSR1)

    def resume(self):
        self.server.p.send_signal(signal.SIGUSR2)

    def signer(self, n) -> bytes:
        return Identity.load(self.tmp / f"client-{n}.key").public

    @property
    def run_id(self):
        return tomllib.loads(self.state_path.read_text())["run_id"]

    def stop(self):
        for p in self.procs:
            p.stop()
        # every line, for a failure that the tail in dump() does not explain
        for i, p in enumerate(self.procs):
            (self.tmp / f"{i}-{p.name}.log").write_text("\n".join(p.lines) + "\n")

    def dump(self) -> str:
        return "\n\n".join(f"== {p.name}\n{p.output()}" for p in self.procs)


class Observer:
    """Watches coordinator states from the test process (a read-only connection)."""

    def __init__(self, port, run_id):
        self.port, self.run_id = port, run_id
        self.history = []

    async def wait_for(self, predicate, timeout=60, what="condition"):
        backend = CentralizedBackend(f"ws://127.0.0.1:{self.port}", self.run_id, observer=True)
        await backend.connect()
        try:
            async def loop():
                while True:
                    st = await backend.next_state()
                    self.history.append(st)
                    if predicate(st):
                        return st
            return await asyncio.wait_for(loop(), timeout)
        except asyncio.TimeoutError:
            last = self.history[-1] if self.history else None
            summary = (f"{last.run_state.name} epoch {last.epoch} step {last.step}" if last
                       else "no state")
            raise AssertionError(f"timed out waiting for {what}; last state: {summary}") from None
        finally:
            await backend.close()

    def wait(self, predicate, timeout=60, what="condition"):
        return asyncio.run(self.wait_for(predicate, timeout, what))
