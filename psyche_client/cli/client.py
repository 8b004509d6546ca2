"""psyche-centralized-client: join a run on a centralized server and do this client's duties."""

import asyncio

import click

from ..backends.centralized import CentralizedBackend, FatalBackendError
from ..backends.base import BackendError
from ..client.daemon import ClientDaemon
from ..client.dummy_trainer import DummyTrainer
from ..identity import Identity, IdentityError
from ..p2p.mesh import PeerMesh
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
@click.option("--tui", type=bool, default=False, show_default=True,
              help="Accepted for compatibility; the client prints progress lines.")
@click.option("--dummy-training-delay-secs", type=float, default=1.0, show_default=True,
              help="Simulated training: seconds each batch takes.")
def train(run_id, server_addr, identity_secret_key_path, bind_p2p_port, bind_p2p_host, tui,
          dummy_training_delay_secs):
    identity = _identity(identity_secret_key_path)
    log = make_logger(f"[{identity.public.hex()[:8]}] ")
    trainer = DummyTrainer(run_id, dummy_training_delay_secs)

    async def go():
        mesh = PeerMesh(identity.public.hex(), on_message=None, host=bind_p2p_host,
                        port=bind_p2p_port)
        addr = await mesh.start()
        backend = CentralizedBackend(server_url(server_addr), run_id, identity, identity.public,
                                     addr)
        log(f"client {identity.public.hex()} joining run {run_id!r} at {server_addr}, p2p {addr}")
        return await ClientDaemon(identity, backend, mesh, trainer, log=log).run()

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
