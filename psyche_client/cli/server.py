"""psyche-centralized-server: host a run's coordinator for clients to join over websockets."""

import asyncio
import logging
import os
import signal
import time

import click

from psyche_coordinator_core import LayoutError, apply

from ..server.allowlist import AllowList, AllowListError
from ..server.coordinator_server import CoordinatorServer
from ..server.data_server import DataServer
from ..server.persistence import StateStore
from ..server.state_file import StateFileError, load_data_file, load_run_spec, load_state_file
from .common import configure_logging, fail, tui_enabled
from .tui import RecentLines, redraw, render

log = logging.getLogger(__name__)


@click.group(help="Host the coordinator of a training run (the centralized backend).")
def main():
    pass


@main.command("validate-config", help="Check that state.toml (and data.toml) are valid.")
@click.option("--state", "state_path", required=True, type=click.Path(dir_okay=False),
              help="Path to the state.toml of the run.")
@click.option("--data-config", type=click.Path(dir_okay=False), default=None,
              help="Path to data.toml for the TCP data server; not checked if omitted.")
def validate_config(state_path, data_config):
    try:
        st = load_state_file(state_path)
        spec = load_run_spec(state_path, st)
        if data_config:
            load_data_file(data_config)
    except StateFileError as e:
        fail(str(e))
    training = (f"{spec.model.num_layers}-layer Llama, data {spec.data.kind}, spec "
                f"{spec.spec_hash().hex()[:16]} ({len(spec.canonical_bytes())} bytes)" if spec
                else "simulated training")
    click.echo(f"ok: run {st.run_id!r}, {st.config.total_steps} steps, "
               f"{st.config.init_min_clients} clients to start, {training}")


@main.command(help="Start the server and coordinate the run declared in state.toml. The "
              "operator pauses the run with SIGUSR1 (`kill -USR1 PID`: an active round ends, "
              "then its Cooldown, and every client is withdrawn; clients joining after the "
              "resume start from the run's recorded snapshot) and resumes it with SIGUSR2; "
              "SIGHUP rereads the --allow file.")
@click.option("--state", "state_path", required=True, type=click.Path(dir_okay=False),
              help="Path to TOML of the coordinator state.")
@click.option("-s", "--server-port", type=int, default=0, show_default=True,
              help="Port clients connect to; 0 picks a free one (printed at start).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--tui", type=bool, default=True, show_default=True,
              help="Full-screen status view (only when stdout is a terminal).")
@click.option("--data-config", type=click.Path(dir_okay=False), default=None,
              help="Path to TOML of the data server config.")
@click.option("--save-state-dir", type=click.Path(file_okay=False), default=None,
              help="Persist the coordinator state here; a restarted server resumes from it.")
@click.option("--init-warmup-time", type=int, default=None,
              help="Override warmup_time of the state file (fresh runs only).")
@click.option("--init-min-clients", type=int, default=None,
              help="Override init_min_clients of the state file (fresh runs only).")
@click.option("--withdraw-on-disconnect", type=bool, default=True, show_default=True,
              help="Withdraw a client from the run as soon as its connection drops.")
@click.option("--reconnect-grace", type=float, default=20.0, show_default=True,
              help="After a restart from --save-state-dir: seconds the saved state's clients "
                   "and joiners have to connect again; then those that did not are withdrawn "
                   "(with --withdraw-on-disconnect).")
@click.option("--tick-interval", type=float, default=0.5, show_default=True,
              help="Longest time between the server's own ticks; it also ticks as soon as "
                   "a phase is due.")
@click.option("--allow", "allow_file", type=click.Path(dir_okay=False), default=None,
              help="Allow-list: a file of the identities (public keys, 64 hex digits or "
                   "base58, one a line, # comments) that may take part; others are refused "
                   "with NotAllowed. Reread on SIGHUP. Without --allow and --allow-key the run "
                   "is permissionless.")
@click.option("--allow-key", "allow_keys", multiple=True, metavar="KEY",
              help="An identity that may take part (hex or base58); repeatable, and added to "
                   "--allow's file.")
def run(state_path, server_port, host, tui, data_config, save_state_dir, init_warmup_time,
        init_min_clients, withdraw_on_disconnect, reconnect_grace, tick_interval, allow_file,
        allow_keys):
    recent = RecentLines() if tui_enabled(tui) else None
    configure_logging(handler=recent)  # with the view, its last lines are drawn under it
    allow = None
    if allow_file is not None or allow_keys:
        try:
            allow = AllowList(allow_file, allow_keys)
        except AllowListError as e:
            fail(str(e))
        log.info("allow-list: %d identities may take part%s", len(allow),
                 f" (kill -HUP {os.getpid()} rereads {allow_file})" if allow_file else "")

    try:
        initial = load_state_file(state_path, init_min_clients, init_warmup_time)
        spec = load_run_spec(state_path, initial)
        data_cfg = load_data_file(data_config) if data_config else None
    except StateFileError as e:
        fail(str(e))
    if data_cfg is not None and (spec is None or spec.data.kind != "server"):
        fail("--data-config needs [data] kind = \"server\" with its address in the state file")
    if data_cfg is not None and data_cfg.seq_len != spec.model.max_seq_len:
        fail(f"{data_config}: seq_len {data_cfg.seq_len} differs from the model's "
             f"max_seq_len {spec.model.max_seq_len}")
    store = StateStore(save_state_dir) if save_state_dir else None
    state, ledger = None, {}
    if store is not None:
        try:
            state, ledger = store.load_all()
        except LayoutError as e:
            fail(str(e))
        if state is not None and state.run_id != initial.run_id:
            fail(f"{store.path} holds run {state.run_id!r} but {state_path} declares "
                 f"{initial.run_id!r}; use another --save-state-dir")
        if state is not None:
            log.info("resuming run %r from %s: %s, epoch %d, step %d, %d clients, %d identities "
                     "in the points ledger", state.run_id, store.path, state.run_state.name,
                     state.epoch, state.step, len(state.clients), len(ledger))
    spec_hash = spec.spec_hash() if spec else bytes(32)
    if state is not None and state.spec_hash != spec_hash:
        # this server hands its clients the file's spec; the state keeps the hash the run began
        # with (only a halted run's can change). A new store endpoint is a reason to do this;
        # another model is not: the clients' parameters would no longer match the run's
        log.warning("%s declares spec %s, the run began with spec %s: clients get the file's",
                    state_path, spec_hash.hex()[:16], state.spec_hash.hex()[:16])
    restored = state is not None
    if state is None:
        now = int(time.time())
        state = apply(apply(initial, now, "update", spec_hash=spec_hash), now, "resume")
    server = CoordinatorServer(state, store, withdraw_on_disconnect, tick_interval,
                               spec=spec.to_dict() if spec else None,
                               reconnect_grace=reconnect_grace if restored else None,
                               ledger=ledger, allow=allow)

    def reload_allow_list():
        try:
            log.info("allow-list reread: %d identities may take part", allow.reload())
        except AllowListError as e:
            log.error("allow-list not reread, the previous one stays: %s", e)

    async def main_loop():
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, server.authority, "pause")
        loop.add_signal_handler(signal.SIGUSR2, server.authority, "resume")
        if allow is not None and allow.path is not None:
            loop.add_signal_handler(signal.SIGHUP, reload_allow_list)
        if data_cfg is not None:
            data_host, _, data_port = spec.data.address.rpartition(":")
            data = DataServer(data_cfg, state.run_id, authorize=server.is_epoch_client)
            port = await data.start(data_host, int(data_port))
            log.info("data server: %s on %s:%d", data_cfg.dir, data_host, port)
        task = asyncio.ensure_future(server.run(host, server_port))
        if recent is not None:
            while not task.done():
                redraw(render(server.state, list(recent.lines)))
                await asyncio.sleep(1)
        await task

    try:
        asyncio.run(main_loop())
    except KeyboardInterrupt:
        pass
    except OSError as e:
        fail(f"cannot listen on {host}:{server_port}: {e}")


if __name__ == "__main__":
    main()
