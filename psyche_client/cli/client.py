"""psyche-centralized-client: join a run on a centralized server and do this client's duties;
sign delegations for contributor identities; print a run's points leaderboard."""

import asyncio

import click

from ..backends.centralized import CentralizedBackend
from ..delegation import Delegation, DelegationError
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
@click.option("--delegation", "delegation_path", type=click.Path(dir_okay=False), default=None,
              help="A delegation file (`psyche-centralized-client delegate`) by which a "
              "contributor identity lets this node key act for it in this run: the node joins "
              "as that identity and its points go there (several nodes may share one "
              "identity). The server checks the signature.")
@client_options
def train(run_id, server_addr, identity_secret_key_path, delegation_path, **opts):
    identity = _identity(identity_secret_key_path)
    delegation = None
    if delegation_path:
        try:
            delegation = Delegation.load(delegation_path)
        except DelegationError as e:
            fail(str(e))
        why = delegation.problem(run_id, identity.public)
        if why:
            fail(f"{delegation_path}: {why}")

    def make_backend(addr):
        return CentralizedBackend(server_url(server_addr), run_id, identity, identity.public,
                                  addr, delegation=delegation)

    run_client(run_id, identity, make_backend, f"at {server_addr}",
               contributor=delegation.identity if delegation else None, **opts)


@main.command(help="Sign a delegation: the contributor identity (its secret key) lets one node "
              "key (--delegate, the node's `show-identity`) act for it in one run, so that the "
              "node's points go to the identity. Give the file to the node's `train "
              "--delegation`. The identity's key never leaves this machine.")
@click.option("--identity-secret-key-path", "--identity-key", "identity_path", required=True,
              type=click.Path(dir_okay=False, exists=True),
              help="The contributor identity's 32-byte secret key (raw or 64 hex characters).")
@click.option("--delegate", required=True,
              help="The node key that acts for the identity: 64 hex characters.")
@click.option("--run-id", required=True, help="The run the delegation is good for.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Where to write the delegation (JSON).")
def delegate(identity_path, delegate, run_id, output):
    identity = _identity(identity_path)
    try:
        key = bytes.fromhex(delegate)
        d = Delegation.sign(identity, run_id, key)
    except (ValueError, DelegationError):
        fail(f"--delegate {delegate!r}: expected a 32-byte public key as 64 hex characters")
    d.save(output)
    click.echo(f"{output}: {identity.public.hex()} delegates run {run_id!r} to {key.hex()}")


@main.command(help="Print the run's points leaderboard: per contributor identity, the rounds "
              "present and their points, the sequences trained and vouched for by the "
              "witnesses (tokens, estimated FLOPs) and their compute points, the total and the "
              "rank (ties share one). It counts the settled ledger plus what the slots hold "
              "now, so it is live during an epoch (docs/points.md). Connects as an observer: "
              "no key needed.")
@click.option("--server-addr", "--server", "server_addr", required=True,
              help="The coordinator server: host:port or ws://host:port.")
@click.option("--run-id", required=True, help="The run (the server checks it).")
@click.option("--json", "as_json", is_flag=True, default=False,
              help="Print JSON ({\"leaderboard\": [{rank, identity, presence_rounds, "
              "presence_points, sequences, tokens, flops, compute_points, total}]}) instead "
              "of a table.")
@click.option("--settled", is_flag=True, default=False,
              help="Only the settled ledger, without what the slots hold now.")
def leaderboard(server_addr, run_id, as_json, settled):
    from ..backends.base import BackendError
    from ..ledger import ledger_from_json
    from .leaderboard import render_json, render_table

    async def ask():
        backend = CentralizedBackend(server_url(server_addr), run_id, observer=True,
                                     reconnect=False)
        await backend.connect()
        try:
            state = await asyncio.wait_for(backend.next_state(), 30)
            return state, await backend.query("leaderboard")
        finally:
            await backend.close()

    try:
        state, result = asyncio.run(ask())
    except (BackendError, asyncio.TimeoutError) as e:
        fail(f"leaderboard: {e or 'no answer from the server'}", 1)
    ledger = ledger_from_json(result["settled" if settled else "ledger"])
    click.echo(render_json(ledger, state.config) if as_json else render_table(ledger,
                                                                              state.config))


if __name__ == "__main__":
    main()
