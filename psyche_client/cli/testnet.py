"""The local testnet's processes: a coordinator (the centralized server here; ChainTestnet puts
psyche-localnet in its place) and N clients on this machine, their output relayed line by line
with the process's name in front, until the run finishes."""

import asyncio
import logging
import os
import random
import re
import signal
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..identity import Identity

log = logging.getLogger(__name__)

LISTEN = re.compile(r"listening on ws://[^:]+:(\d+)")
# every client of a local testnet on this machine: loopback, a free port each (a contributor's
# default is every interface on one fixed port)
LOOPBACK_P2P = ("--bind-p2p-host", "127.0.0.1", "--bind-p2p-port", "0")
FINISHED = re.compile(r"-> Finished")


def run_id_of(state_path: Path) -> str:
    return tomllib.loads(state_path.read_text())["run_id"]


@dataclass(frozen=True)
class TestnetOptions:
    state_path: Path  # the run's state.toml (a data.toml beside it starts the data server)
    workdir: Path  # where the clients' keys and metrics files (and the chain's keypairs) go
    num_clients: int  # clients started, named client-1 .. client-N
    server_port: int = 20000  # the server's port, 0: a free one (the chain picks its own)
    dummy_training_delay_secs: float = 1.0  # seconds a simulated batch takes (no [model])
    random_kill_num: int = 0  # clients SIGKILLed, then restarted, every random_kill_interval
    random_kill_interval: float = 120  # seconds between random kills
    allowed_to_kill: tuple = ()  # client numbers (1-based) random kills pick from; empty: all
    save_state_dir: str = None  # where the server persists its state; None: it does not


class Testnet:
    coordinator_name = "server"

    def __init__(self, opts: TestnetOptions):
        self.opts = opts
        self.workdir = Path(opts.workdir)
        self.allowed = list(opts.allowed_to_kill) or list(range(1, opts.num_clients + 1))
        self.run_id = run_id_of(opts.state_path)
        self.procs = {}
        self.finished = asyncio.Event()
        self.listening = asyncio.get_event_loop().create_future()

    def server_cmd(self):
        o = self.opts
        cmd = [sys.executable, "-u", "-m", "psyche_client.cli.server", "run", "--state",
               str(o.state_path), "--server-port", str(o.server_port), "--tui", "false"]
        data_toml = o.state_path.parent / "data.toml"
        if data_toml.is_file():  # the run's data server: token files next to the state file
            cmd += ["--data-config", str(data_toml)]
        if o.save_state_dir:
            cmd += ["--save-state-dir", str(o.save_state_dir)]
        return cmd

    def client_cmd(self, n):
        key = self.workdir / f"client-{n}.key"
        if not key.exists():
            Identity.generate().save(key)
        return [sys.executable, "-u", "-m", "psyche_client.cli.client", "train", "--run-id",
                self.run_id, "--server-addr", f"127.0.0.1:{self.bound_port}",
                "--identity-secret-key-path", str(key), *LOOPBACK_P2P,
                "--dummy-training-delay-secs", str(self.opts.dummy_training_delay_secs),
                # one CPU thread each: N clients share this machine
                "--torch-threads", "1", "--metrics-file", str(self.workdir / f"client-{n}.jsonl")]

    def shows(self, name, line) -> bool:
        return True

    def on_line(self, name, line):
        if name == "server":
            m = LISTEN.search(line)
            if m and not self.listening.done():
                self.listening.set_result(int(m.group(1)))
            if FINISHED.search(line):
                self.finished.set()

    @staticmethod
    def echo(name, line):
        """A child's line as it printed it, after its name: the testnet's own output, which
        readers (and tests) split by process, not a log record of this process."""
        print(f"[{name:>8}] {line}", flush=True)

    async def prepare(self) -> bool:
        """After the coordinator is up, before the clients start."""
        return True

    async def _pump(self, name, proc):
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            if self.shows(name, line):
                self.echo(name, line)
            self.on_line(name, line)

    async def start(self, name, cmd):
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.procs[name] = proc
        asyncio.ensure_future(self._pump(name, proc))
        return proc

    async def killer(self):
        while True:
            await asyncio.sleep(self.opts.random_kill_interval)
            victims = random.sample(self.allowed, min(self.opts.random_kill_num,
                                                      len(self.allowed)))
            for n in victims:
                proc = self.procs.get(f"client-{n}")
                if proc and proc.returncode is None:
                    log.info("killing client-%d (random kill)", n)
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
            await asyncio.sleep(1)
            for n in victims:
                log.info("restarting client-%d", n)
                await self.start(f"client-{n}", self.client_cmd(n))

    async def run(self, timeout) -> int:
        server = await self.start("server", self.server_cmd())
        exited = asyncio.ensure_future(server.wait())
        await asyncio.wait([self.listening, exited], timeout=30,
                           return_when=asyncio.FIRST_COMPLETED)
        if not self.listening.done():
            log.info("%s did not start%s", self.coordinator_name,
                     f" (exit code {server.returncode})" if exited.done() else " within 30 s")
            await self.stop()
            return 1
        self.bound_port = self.listening.result()
        if not await self.prepare():
            await self.stop()
            return 1
        for n in range(1, self.opts.num_clients + 1):
            await self.start(f"client-{n}", self.client_cmd(n))
        killer = asyncio.ensure_future(self.killer()) if self.opts.random_kill_num else None
        try:
            await asyncio.wait_for(self.finished.wait(), timeout)
            log.info("run finished")
            code = 0
        except asyncio.TimeoutError:
            log.info("run did not finish within %s s", timeout)
            code = 1
        finally:
            if killer:
                killer.cancel()
            await self.stop()
        return code

    async def stop(self):
        clients = [p for n, p in self.procs.items() if n != "server"]
        try:  # clients exit by themselves once they see Finished
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in clients)), 10)
        except asyncio.TimeoutError:
            pass
        for p in self.procs.values():
            if p.returncode is None:
                p.terminate()
        await asyncio.gather(*(p.wait() for p in self.procs.values()))
