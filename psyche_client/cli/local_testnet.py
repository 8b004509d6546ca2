"""psyche-centralized-local-testnet: a server and N clients on this machine, headless (lines
prefixed by process) or in tmux panes with --tui. Stops when the run finishes."""

import asyncio
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import click

from ..identity import Identity
from .chain_testnet import ChainTestnet
from .common import configure_logging, fail
from .testnet import Testnet, TestnetOptions, run_id_of

log = logging.getLogger(__name__)


def _state_path(config_path: str) -> Path:
    p = Path(config_path)
    if p.is_dir():
        p = p / "state.toml"
    if not p.is_file():
        fail(f"--config-path {config_path}: no state.toml there")
    return p


def _tmux(state_path, num_clients, port, delay, workdir):
    """--tui: each process in its own tmux pane, as Psyche's testnet does."""
    if shutil.which("tmux") is None:
        fail("--tui true needs tmux (apt-get install tmux); use --tui false to run headless")
    run_id = run_id_of(state_path)
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
    configure_logging("testnet: ")
    log.info("starting %s and %d clients for %s (keys in %s)",
             "a local chain" if chain else "a server", num_clients, state_path, workdir)
    opts = TestnetOptions(state_path=state_path, workdir=Path(workdir), num_clients=num_clients,
                          server_port=server_port,
                          dummy_training_delay_secs=dummy_training_delay_secs,
                          random_kill_num=random_kill_num,
                          random_kill_interval=random_kill_interval,
                          allowed_to_kill=tuple(allowed), save_state_dir=save_state_dir)

    async def go():
        net = ChainTestnet(opts) if chain else Testnet(opts)
        return await net.run(timeout)

    raise SystemExit(asyncio.run(go()))


if __name__ == "__main__":
    main()
