"""psyche-centralized-client: join a run on a centralized server and do this client's duties."""

import asyncio

import click

from ..backends.centralized import CentralizedBackend, FatalBackendError
from ..backends.base import BackendError
from ..client.daemon import ClientDaemon
from ..client.dummy_trainer import DummyTrainer
from ..identity import Identity, IdentityError
from ..p2p.transport import make_transport
from .common import fail, make_logger

KEY_HELP = ("Path to the client's 32-byte secret key (create one with `openssl rand 32 > "
            "secret.key`); the RAW_IDENTITY_SECRET_KEY environment variable (hex) also works.")


def _identity(path) -> Identity:
    try:
        return Identity.load(path)
    except (IdentityError, OSError) as e:
        fail(str(e))


def server_url(addr: str) -> str:
    if addr.startswith(("ws://", "wss://")):
        return addr
    if ":" not in addr:
        fail(f"--server-addr {addr!r}: expected host:port")
    return f"ws://{addr}"


@click.group(help="A client of a centralized Psyche training run.")
def main():
    pass


@main.command("show-identity", help="Print the client's public identity, used to join runs.")
@click.option("--identity-secret-key-path", type=click.Path(dir_okay=False), default=None,
              help=KEY_HELP)
def show_identity(identity_secret_key_path):
    click.echo(_identity(identity_secret_key_path).public.hex())


@main.command(help="Join a training run and contribute to it until it finishes.")
@click.option("--run-id", required=True, help="The run to join (the server checks it).")
@click.option("--server-addr", required=True, help="host:port of the coordinator server.")
@click.option("-i", "--identity-secret-key-path", type=click.Path(dir_okay=False), default=None,
              help=KEY_HELP + " If omitted, a random identity is used.")
@click.option("-b", "--bind-p2p-port", type=int, default=0, show_default=True,
              help="Port for peer-to-peer traffic; 0 picks a free one.")
@click.option("--bind-p2p-host", default="127.0.0.1", show_default=True,
              help="Address peers reach this client at.")
@click.option("--p2p", "p2p_kind", type=click.Choice(["iroh", "ws"]), default="iroh",
              show_default=True, help="Result transport: iroh (QUIC, payloads as verified blobs) "
              "or ws (a websocket mesh).")
@click.option("--tui", type=bool, default=False, show_default=True,
              help="Accepted for compatibility; the client prints progress lines.")
@click.option("--dummy-training-delay-secs", type=float, default=1.0, show_default=True,
              help="Simulated training (runs without a [model]): seconds each batch takes.")
@click.option("--micro-batch-size", type=click.IntRange(1), default=8, show_default=True,
              help="Sequences per forward/backward pass; gradients accumulate over a batch.")
@click.option("--device", default=None, help="torch device (default: cuda if present, else cpu).")
@click.option("--torch-threads", type=click.IntRange(1), default=None,
              help="CPU threads for torch (default: torch's own choice).")
@click.option("--data-parallelism", type=click.IntRange(1), default=1, show_default=True,
              help="GPUs this client trains on (only 1 is supported so far).")
@click.option("--metrics-file", type=click.Path(dir_okay=False), default=None,
              help="Append one JSON object per training step, apply and held-out loss.")
@click.option("--wandb-project", default=None, help="Also log to this wandb project "
              "(only if wandb is installed and configured).")
@click.option("--wandb-run", default=None)
@click.option("--wandb-group", default=None)
@click.option("--wandb-entity", default=None)
def train(run_id, server_addr, identity_secret_key_path, bind_p2p_port, bind_p2p_host, p2p_kind, tui,
          dummy_training_delay_secs, micro_batch_size, device, torch_threads, data_parallelism,
          metrics_file, wandb_project, wandb_run, wandb_group, wandb_entity):
    identity = _identity(identity_secret_key_path)
    log = make_logger(f"[{identity.public.hex()[:8]}] ")
    if data_parallelism != 1:
        fail("--data-parallelism above 1 is not supported yet")
    wandb_args = dict(project=wandb_project, name=wandb_run, group=wandb_group,
                      entity=wandb_entity)

    def make_trainer(spec):
        if spec is None or spec.get("data", {}).get("kind") == "dummy":
            log("simulated training (the run declares no model)")
            return DummyTrainer(run_id, dummy_training_delay_secs)
        import torch

        from ..training.spec import RunSpec
        from ..training.trainer import DistroTrainer, Metrics
        if torch_threads:
            torch.set_num_threads(torch_threads)
        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        return DistroTrainer(RunSpec.from_dict(spec), run_id, identity, log=log,
                             metrics=Metrics(metrics_file, wandb_args, log), device=dev,
                             micro_batch_size=micro_batch_size)

    async def go():
        transport = make_transport(p2p_kind, identity, None, log, bind_p2p_host, bind_p2p_port)
        addr = await transport.start()
        backend = CentralizedBackend(server_url(server_addr), run_id, identity, identity.public,
                                     addr)
        log(f"client {identity.public.hex()} joining run {run_id!r} at {server_addr}, "
            f"p2p {p2p_kind} {addr[:48]}")
        return await ClientDaemon(identity, backend, transport, make_trainer, log=log).run()

    try:
        code = asyncio.run(go())
    except FatalBackendError as e:
        fail(str(e))
    except BackendError as e:
        fail(str(e), 1)
    except KeyboardInterrupt:
        code = 130
    raise SystemExit(code)


if __name__ == "__main__":
    main()
