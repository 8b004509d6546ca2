"""psyche-centralized-client: join a run on a centralized server and do this client's duties."""

import click

from ..backends.centralized import CentralizedBackend
from ..identity import Identity, IdentityError
from .common import client_options, fail, run_client

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
@client_options
def train(run_id, server_addr, identity_secret_key_path, **opts):
    identity = _identity(identity_secret_key_path)

    def make_backend(addr):
        return CentralizedBackend(server_url(server_addr), run_id, identity, identity.public,
                                  addr)

    run_client(run_id, identity, make_backend, f"at {server_addr}", **opts)


if __name__ == "__main__":
    main()
