"""psyche-centralized-local-testnet: a server and N clients on this machine, headless (lines
prefixed by process) or in tmux panes with --tui. Stops when the run finishes."""

import asyncio
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import tomllib
from pathlib import Path

import click

from ..identity import Identity
from .common import fail, make_logger

LISTEN = re.compile(r"listening on ws://[^:]+:(\d+)")
FINISHED = re.compile(r"-> Finished")


def _state_path(config_path: str) -> Path:
    p = Path(config_path)
    if p.is_dir():
        p = p / "state.toml"
    if not p.is_file():
        fail(f"--config-path {config_path}: no state.toml there")
    return p


def _run_id(state_path: Path) -> str:
    return tomllib.loads(state_path.read_text())["run_id"]


class Testnet:
    def __init__(self, state_path, num_clients, port, delay, kill_num, kill_interval,
                 allowed_to_kill, save_state_dir, workdir, log):
        self.state_path, self.num_clients, self.port = state_path, num_clients, port
        self.delay, self.kill_num, self.kill_interval = delay, kill_num, kill_interval
        self.allowed = allowed_to_kill or list(range(1, num_clients + 1))
        self.save_state_dir, self.workdir, self.log = save_state_dir, Path(workdir), log
        self.run_id = _run_id(state_path)
        self.procs = {}
        self.finished = asyncio.Event()
        self.listening = asyncio.get_event_loop().create_future()

    coordinator_name = "server"

    def server_cmd(self):
        cmd = [sys.executable, "-u", "-m", "psyche_client.cli.server", "run", "--state",
               str(self.state_path), "--server-port", str(self.port), "--tui", "false"]
        data_toml = self.state_path.parent / "data.toml"
        if data_toml.is_file():  # the run's data server: token files next to the state file
            cmd += ["--data-config", str(data_toml)]
        if self.save_state_dir:
            cmd += ["--save-state-dir", str(self.save_state_dir)]
        return cmd

    def client_cmd(self, n):
        key = self.workdir / f"client-{n}.key"
        if not key.exists():
            Identity.generate().save(key)
        return [sys.executable, "-u", "-m", "psyche_client.cli.client", "train", "--run-id",
                self.run_id, "--server-addr", f"127.0.0.1:{self.bound_port}",
                "--identity-secret-key-path", str(key),
                "--dummy-training-delay-secs", str(self.delay),
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

    async def prepare(self) -> bool:
        """After the coordinator is up, before the clients start."""
        return True

    async def _pump(self, name, proc):
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            if self.shows(name, line):
                print(f"[{name:>8}] {line}", flush=True)
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
            await asyncio.sleep(self.kill_interval)
            victims = random.sample(self.allowed, min(self.kill_num, len(self.allowed)))
            for n in victims:
                proc = self.procs.get(f"client-{n}")
                if proc and proc.returncode is None:
                    self.log(f"killing client-{n} (random kill)")
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
            await asyncio.sleep(1)
            for n in victims:
                self.log(f"restarting client-{n}")
                await self.start(f"client-{n}", self.client_cmd(n))

    async def run(self, timeout) -> int:
        server = await self.start("server", self.server_cmd())
        exited = asyncio.ensure_future(server.wait())
        await asyncio.wait([self.listening, exited], timeout=30,
                           return_when=asyncio.FIRST_COMPLETED)
        if not self.listening.done():
            self.log(f"{self.coordinator_name} did not start" +
                     (f" (exit code {server.returncode})" if exited.done() else " within 30 s"))
            await self.stop()
            return 1
        self.bound_port = self.listening.result()
        if not await self.prepare():
            await self.stop()
            return 1
        for n in range(1, self.num_clients + 1):
            await self.start(f"client-{n}", self.client_cmd(n))
        killer = asyncio.ensure_future(self.killer()) if self.kill_num else None
        try:
            await asyncio.wait_for(self.finished.wait(), timeout)
            self.log("run finished")
            code = 0
        except asyncio.TimeoutError:
            self.log(f"run did not finish within {timeout} s")
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


def _tmux(state_path, num_clients, port, delay, workdir):
    """--tui: each process in its own tmux pane, as Psyche's testnet does."""
    if shutil.which("tmux") is None:
        fail("--tui true needs tmux (apt-get install tmux); use --tui false to run headless")
    run_id = _run_id(state_path)
    session = f"psyche-{run_id}"
    py = sys.executable
    server = (f"{py} -m psyche_client.cli.server run --state {state_path} --server-port {port}")
    cmds = [server]
    for n in range(1, num_clients + 1):
        key = Path(workdir) / f"client-{n}.key"
        Identity.generate().save(key)
        cmds.append(f"sleep 2; {py} -m psyche_client.cli.client train --run-id {run_id} "
                    f"--server-addr 127.0.0.1:{port} -i {key} --dummy-training-delay-secs {delay}")
    os.system(f"tmux new-session -d -s {session} '{cmds[0]}'")
    for c in cmds[1:]:
        os.system(f"tmux split-window -t {session} '{c}'; tmux select-layout -t {session} tiled")
    os.execvp("tmux", ["tmux", "attach", "-t", session])


@click.group(help="Run a coordinator server and several clients on this machine.")
def main():
    pass


@main.command(help="Start the local testnet and run it until the run finishes.")
@click.option("--num-clients", type=click.IntRange(1, 256), required=True,
              help="Number of clients to start.")
@click.option("--config-path", required=True,
              help="Directory holding state.toml (or the state.toml itself).")
@click.option("--server-port", type=int, default=20000, show_default=True,
              help="Port of the server (0 picks a free one).")
@click.option("--tui", type=bool, default=False, show_default=True,
              help="Show each process in a tmux pane instead of prefixed lines.")
@click.option("--random-kill-num", type=int, default=0, show_default=True,
              help="Kill this many clients at random every --random-kill-interval seconds "
                   "(SIGKILL), then restart them.")
@click.option("--allowed-to-kill", default="", help="Comma-separated client numbers (1-based) "
              "that may be killed; default all.")
@click.option("--random-kill-interval", type=float, default=120, show_default=True,
              help="Seconds between random kills.")
@click.option("--dummy-training-delay-secs", type=float, default=1.0, show_default=True,
              help="Simulated training time per batch.")
@click.option("--save-state-dir", default=None, help="Where the server persists its state.")
@click.option("--timeout", type=float, default=600, show_default=True,
              help="Give up if the run has not finished after this many seconds.")
@click.option("--chain", is_flag=True, default=False,
              help="Run the coordinator on a local Solana chain (psyche-localnet, built with "
                   "cargo if needed) instead of the centralized server: the run is created "
                   "with psyche-solana-client and the clients join it with join_run.")
def start(num_clients, config_path, server_port, tui, random_kill_num, allowed_to_kill,
          random_kill_interval, dummy_training_delay_secs, save_state_dir, timeout, chain):
    state_path = _state_path(config_path).resolve()
    try:
        allowed = [int(x) for x in allowed_to_kill.split(",") if x.strip()]
    except ValueError:
        fail("--allowed-to-kill: expected comma-separated client numbers, e.g. 2,3")
    if any(not 1 <= n <= num_clients for n in allowed):
        fail(f"--allowed-to-kill: client numbers go from 1 to {num_clients}")
    workdir = tempfile.mkdtemp(prefix="psyche-testnet-")
    if tui and chain:
        fail("--tui true is not available with --chain yet; use --tui false")
    if save_state_dir and chain:
        fail("--save-state-dir is for the server; the chain keeps the run's state itself")
    if tui:
        _tmux(state_path, num_clients, server_port or 20000, dummy_training_delay_secs, workdir)
    log = make_logger("testnet: ")
    log(f"starting {'a local chain' if chain else 'a server'} and {num_clients} clients for "
        f"{state_path} (keys in {workdir})")

    async def go():
        kind = Testnet
        if chain:
            from .chain_testnet import ChainTestnet as kind
        net = kind(state_path, num_clients, server_port, dummy_training_delay_secs,
                   random_kill_num, random_kill_interval, allowed, save_state_dir, workdir, log)
        return await net.run(timeout)

    raise SystemExit(asyncio.run(go()))


if __name__ == "__main__":
    main()
