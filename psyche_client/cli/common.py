"""Pieces shared by the command lines."""

import asyncio
import logging
import sys

import click

log = logging.getLogger(__name__)

STAMP = "%H:%M:%S"


def configure_logging(prefix: str = "", handler: logging.Handler = None) -> None:
    """Send the package's log records (INFO and up) to stdout as `HH:MM:SS <prefix><message>`,
    the line form the local testnet and the tests read (a client's prefix is its identity), or
    to `handler` (the server's TUI keeps the recent lines to draw them). Other libraries'
    records are left to Python's defaults."""
    if handler is None:
        handler = logging.StreamHandler(sys.stdout)  # flushed after every record
        handler.setFormatter(logging.Formatter(f"%(asctime)s {prefix}%(message)s", STAMP))
    # `__main__`: the name a command's own module logs under when run as `python -m ...`
    for name in ("psyche_client", "__main__"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):  # replaced, not added: no line is printed twice
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def tui_enabled(flag: bool) -> bool:
    """The TUI needs a terminal; without one (CI, pipes, the local testnet) it stays off."""
    return bool(flag) and sys.stdout.isatty()


# the contributor's default p2p port (UDP): documented, so that a router can forward it
DEFAULT_P2P_PORT = 29400


def fail(message: str, code: int = 2):
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


_CLIENT_OPTIONS = [
    click.option("-b", "--bind-p2p-port", type=click.IntRange(0, 65535),
                 default=DEFAULT_P2P_PORT, envvar="PSYCHE_BIND_P2P_PORT", show_default=True,
                 help="Port for peer-to-peer traffic (UDP; TCP with --p2p ws). Peers reach a "
                 "client behind a router through hole punching or the run's relay; forwarding "
                 "this port on the router gives them a direct path for sure. 0 picks a free "
                 "one, as several clients on one machine need (tests and local testnets do). "
                 "Env: PSYCHE_BIND_P2P_PORT."),
    click.option("--bind-p2p-host", default="0.0.0.0", envvar="PSYCHE_BIND_P2P_HOST",
                 show_default=True,
                 help="Address to bind for peer-to-peer traffic: 0.0.0.0 is every interface "
                 "(IPv4 and IPv6); 127.0.0.1 keeps the client to this machine. With --p2p ws "
                 "this is also the address peers dial, so it must be a reachable one. "
                 "Env: PSYCHE_BIND_P2P_HOST."),
    click.option("--iroh-relay", default=None, metavar="URL",
                 help="The run's iroh relay (scripts/relay serves one), e.g. "
                 "http://relay.example:3340: peers reach this client through it when no "
                 "direct path works, and move to a direct one when hole punching succeeds. "
                 "Default: none (direct addresses only)."),
    click.option("--stun", "stun", multiple=True, metavar="HOST:PORT",
                 help="A STUN server (repeatable; a chain run's spec may name them) that tells "
                 "this client its public address, so that peers behind other NATs can punch a "
                 "hole to it. Default: none (peers behind NATs then meet through the relay)."),
    click.option("--p2p-peer", "p2p_peers", multiple=True, metavar="ID@HOST:PORT",
                 help="A peer this client reaches at a known address (repeatable): its p2p id "
                 "(64 hex digits) and where it listens. For a client that cannot reach the "
                 "relay: it gets every result through such peers (they forward them)."),
    click.option("--p2p", "p2p_kind", type=click.Choice(["iroh", "ws"]), default="iroh",
                 show_default=True, help="Result transport: iroh (QUIC, payloads as verified "
                 "blobs) or ws (a websocket mesh)."),
    click.option("--tui", type=bool, default=False, show_default=True,
                 help="Accepted for compatibility; the client prints progress lines."),
    click.option("--dummy-training-delay-secs", type=float, default=1.0, show_default=True,
                 help="Simulated training (runs without a [model]): seconds each batch takes."),
    click.option("--micro-batch-size", type=click.IntRange(1), default=8, show_default=True,
                 help="Sequences per forward/backward pass; gradients accumulate over a batch."),
    click.option("--device", default=None,
                 help="torch device (default: cuda if present, else cpu)."),
    click.option("--torch-threads", type=click.IntRange(1), default=None,
                 help="CPU threads for torch (default: torch's own choice)."),
    click.option("--data-parallelism", type=click.IntRange(1), default=1, show_default=True,
                 help="Devices this client trains on: N model replicas (torch.distributed, "
                 "rank r on cuda:r; with --device cpu, N cpu processes for testing) split each "
                 "batch's forward/backward and all-reduce the gradients; the DisTrO step, apply "
                 "and evaluation run once. Ignored by simulated training."),
    click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
                 help="Keep a snapshot of the model here (Hugging Face layout: config.json, "
                 "model.safetensors, manifest.json; one directory per step, written atomically) "
                 "at every Cooldown and snapshot point. Without it, a checkpointer writes to a "
                 "temporary directory it removes after the upload."),
    click.option("--store-access-key", envvar="PSYCHE_S3_ACCESS_KEY", default=None,
                 help="Write credentials for the run's S3 snapshot store ([checkpoint] store of "
                 "its spec; reads need none). With them (or with a local store) the client "
                 "uploads snapshots when it is an elected checkpointer. Env: "
                 "PSYCHE_S3_ACCESS_KEY."),
    click.option("--store-secret-key", envvar="PSYCHE_S3_SECRET_KEY", default=None,
                 help="The secret of --store-access-key. Env: PSYCHE_S3_SECRET_KEY."),
    click.option("--metrics-file", type=click.Path(dir_okay=False), default=None,
                 help="Append one JSON object per training step, apply and held-out loss."),
    click.option("--wandb-project", default=None, help="Also log to this wandb project "
                 "(only if wandb is installed and configured)."),
    click.option("--wandb-run", default=None),
    click.option("--wandb-group", default=None),
    click.option("--wandb-entity", default=None),
]


def client_options(fn):
    """The options every `train` command shares, whatever its backend."""
    for option in reversed(_CLIENT_OPTIONS):
        fn = option(fn)
    return fn


def run_client(run_id, identity, make_backend, where, bind_p2p_port, bind_p2p_host, iroh_relay,
               stun, p2p_peers, p2p_kind, tui, dummy_training_delay_secs, micro_batch_size, device,
               torch_threads, data_parallelism, checkpoint_dir, store_access_key, store_secret_key,
               metrics_file, wandb_project, wandb_run, wandb_group, wandb_entity,
               contributor=None):
    """Starts the p2p transport, connects `make_backend(p2p_addr)` and serves the run until
    it finishes; exits the process with the daemon's code. `contributor`: the identity whose
    points this node earns (a delegation the backend presents; None: the node's own key)."""
    from ..backends.base import BackendError, FatalBackendError
    from ..client.daemon import ClientDaemon
    from ..client.leaving import RunIsFull, install_exit_signals
    from ..p2p.errors import P2PError
    from ..p2p.transport import make_transport
    from ..training.spec import parse_stun_server

    configure_logging(f"[{identity.public.hex()[:8]}] ")
    problem = check_data_parallelism(data_parallelism, device)
    if problem:
        fail(problem)
    if bool(store_access_key) != bool(store_secret_key):
        fail("--store-access-key and --store-secret-key go together")
    if iroh_relay and p2p_kind != "iroh":
        fail("--iroh-relay is the iroh transport's: leave it out with --p2p ws")
    if iroh_relay and not iroh_relay.startswith(("http://", "https://")):
        fail(f"--iroh-relay must be an http:// or https:// URL, not {iroh_relay!r}")
    known = {}
    for peer in p2p_peers:
        pid, _, addr = peer.partition("@")
        if (len(pid) != 64 or any(c not in "0123456789abcdefABCDEF" for c in pid)
                or not addr.rpartition(":")[2].isdigit() or not addr.rpartition(":")[0]):
            fail(f"--p2p-peer {peer!r}: expected ID@HOST:PORT, ID the peer's 64-hex-digit p2p id")
        known.setdefault(pid.lower(), []).append(addr)
    if (stun or known) and p2p_kind != "iroh":
        fail("--stun and --p2p-peer are the iroh transport's: leave them out with --p2p ws")
    for server in stun:
        try:
            parse_stun_server(server)
        except ValueError as e:
            fail(f"--stun: {e}")
    if p2p_kind == "ws" and bind_p2p_host in ("0.0.0.0", "::"):
        fail("--p2p ws tells peers its bind address: give --bind-p2p-host the address they "
             "reach (127.0.0.1 on one machine)")
    wandb_args = dict(project=wandb_project, name=wandb_run, group=wandb_group,
                      entity=wandb_entity)
    make_trainer = trainer_factory(run_id, identity, dummy_training_delay_secs,
                                   micro_batch_size, device, torch_threads, metrics_file,
                                   wandb_args, data_parallelism=data_parallelism)

    async def go():
        transport = make_transport(p2p_kind, identity, None, bind_p2p_host, bind_p2p_port,
                                   relay_url=iroh_relay, stun=stun, known_addrs=known)
        try:
            addr = await transport.start()
        except (P2PError, OSError) as e:
            fail(f"{e}\nhint: another client on this machine? give each its own "
                 "--bind-p2p-port (0 picks a free one)")
        backend = make_backend(addr)
        log.info("client %s joining run %r %s, p2p %s %s", identity.public.hex(), run_id, where,
                 p2p_kind, addr[:48])
        if contributor is not None and contributor != identity.public:
            log.info("acting for contributor identity %s: its points go there",
                     contributor.hex())
        make_writer = writer_factory(run_id, checkpoint_dir, store_access_key, store_secret_key)
        daemon = ClientDaemon(identity, backend, transport, make_trainer, make_writer=make_writer,
                              contributor=contributor)
        install_exit_signals(daemon.leave)  # SIGINT, SIGTERM: withdraw, then exit
        return await daemon.run()

    try:
        code = asyncio.run(go())
    except RunIsFull as e:  # there is no waiting list: the contributor tries again later
        fail(str(e))
    except FatalBackendError as e:  # wrong run, not authorized: retrying cannot help
        fail(str(e))
    except BackendError as e:
        fail(str(e), 1)
    except KeyboardInterrupt:
        code = 130
    raise SystemExit(code)


def default_device(device=None) -> str:
    import torch
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def check_data_parallelism(data_parallelism, device=None):
    """Why `--data-parallelism` cannot work with this device, or None. N > 1 needs torch, and
    N cuda devices from the chosen one on (cuda:i .. cuda:i+N-1), or the cpu (gloo, N processes;
    meant for testing)."""
    if not isinstance(data_parallelism, int) or data_parallelism < 1:
        return f"--data-parallelism must be an integer >= 1, not {data_parallelism!r}"
    if data_parallelism == 1:
        return None
    try:
        import torch
    except ImportError:  # simulated training only: it ignores the option
        return None
    try:
        dev = torch.device(default_device(device))
    except RuntimeError as e:
        return f"--device {device!r}: {e}"
    if dev.type == "cuda":
        base, count = dev.index or 0, torch.cuda.device_count()
        if base + data_parallelism > count:
            return (f"--data-parallelism {data_parallelism} on {dev} needs cuda:{base}.."
                    f"cuda:{base + data_parallelism - 1}, but {count} cuda device(s) are visible")
    elif dev.type != "cpu":
        return f"--data-parallelism above 1 needs cuda or cpu devices, not {dev.type}"
    return None


def trainer_factory(run_id, identity, dummy_delay, micro_batch_size=8, device=None,
                    torch_threads=None, metrics_file=None, wandb_args=None, data_parallelism=1):
    """`make_trainer(spec)` for the client daemon, whatever the backend: simulated training
    when the run declares no model, else DisTrO on a model built from the spec, on
    `data_parallelism` devices (simulated training ignores it)."""
    def make_trainer(spec):
        from ..client.dummy_trainer import DummyTrainer
        if spec is None or spec.get("data", {}).get("kind") == "dummy":
            log.info("simulated training (the run declares no model)")
            return DummyTrainer(run_id, dummy_delay)
        import torch

        from ..training.spec import RunSpec
        from ..training.trainer import DistroTrainer, Metrics
        if torch_threads:
            torch.set_num_threads(torch_threads)
        return DistroTrainer(RunSpec.from_dict(spec), run_id, identity,
                             metrics=Metrics(metrics_file, wandb_args or {}),
                             device=default_device(device), micro_batch_size=micro_batch_size,
                             data_parallelism=data_parallelism)
    return make_trainer


def writer_factory(run_id, checkpoint_dir=None, access_key=None, secret_key=None):
    """`make_writer(spec)` for the client daemon: where this client's snapshots go. It uploads
    to the run's store ([checkpoint] store of the spec) when it can write there (a local store,
    or an S3 store with the credentials given), and keeps them in `checkpoint_dir` if given;
    None when it does neither."""
    def make_writer(spec):
        from ..client.snapshot_writer import SnapshotWriter
        from ..snapshots import SnapshotStoreError, open_store
        ck = (spec or {}).get("checkpoint") or {}
        store = None
        url = ck.get("store")
        if url and (access_key or not url.startswith("s3://")):
            credentials = (access_key, secret_key) if access_key else None
            try:
                store = open_store(url, endpoint=ck.get("endpoint") or None,
                                   credentials=credentials)
            except SnapshotStoreError as e:
                log.warning("no snapshot uploads: the run's store %s: %s", url, e)
        elif url:
            log.info("the run stores snapshots in %s; without write credentials "
                     "(--store-access-key) this client only reads them", url)
        if store is None and not checkpoint_dir:
            return None
        return SnapshotWriter(run_id, store, checkpoint_dir, ck.get("keep", 3))
    return make_writer
