"""`psyche-solana-client train`: a contributor's daemon for a run on Solana."""

from urllib.parse import urlparse

import click

from ..backends.solana import SolanaBackend
from ..chain.keys import KeypairError, identity_of, load_keypair
from ..server.state_file import StateFileError, load_run_spec, load_state_file
from .common import client_options, fail, run_client
from .solana_admin import pubkey_option, rpc_option


def ws_url_for(rpc_url: str) -> str:
    """A validator's PubSub listens on the RPC port + 1 (8899 -> 8900)."""
    u = urlparse(rpc_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        fail(f"--rpc {rpc_url!r}: expected http://host:port")
    port = (u.port or (443 if u.scheme == "https" else 80)) + 1
    return f"{'wss' if u.scheme == 'https' else 'ws'}://{u.hostname}:{port}"


def load_spec(path):
    """The training spec ([model], [optimizer], [data]) of a state.toml, or None (simulate)."""
    if path is None:
        return None
    try:
        spec = load_run_spec(path, load_state_file(path))
    except StateFileError as e:
        fail(str(e))
    if spec is not None and spec.data.kind == "server":
        fail(f"{path}: [data] kind = \"server\" needs the centralized server; on a chain use "
             "\"local\" or \"http\"")
    return None if spec is None else spec.to_dict()


@click.command(help="Join a run on Solana and contribute to it until it finishes: follow the "
               "coordinator account over PubSub, send join_run, witnesses, health checks and "
               "ticks signed by --keypair (also the client's p2p identity).")
@rpc_option
@click.option("--ws", default=None, help="Solana PubSub URL (default: the RPC port + 1).")
@click.option("--keypair", "keypair_path", required=True, type=click.Path(dir_okay=False),
              help="The client's Solana keypair file (JSON); it pays for its transactions.")
@click.option("--run-id", required=True, help="The run to join.")
@click.option("--peer-dir", type=click.Path(file_okay=False), default=None,
              help="Peer directory: clients publish their p2p address there and find each "
                   "other's (clients on one machine or a shared file system). Not needed with "
                   "--iroh-relay: then a peer's key on chain is all it takes to reach it.")
@click.option("--run-spec", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The run's state.toml, for its training spec ([model], [optimizer], "
                   "[data]); without it, or without [model], training is simulated.")
@pubkey_option("--identity", help="The contributor identity to earn points for (a public key "
               "whose owner listed --keypair's key as a delegate: `set-delegates`); default: "
               "--keypair's own key.")
@client_options
def train(rpc, ws, keypair_path, run_id, peer_dir, run_spec, identity, **opts):
    try:
        keypair = load_keypair(keypair_path)
    except KeypairError as e:
        fail(str(e))
    if peer_dir is None and not opts.get("iroh_relay"):
        fail("a chain client finds its peers through the run's relay (--iroh-relay URL) or a "
             "shared peer directory (--peer-dir): give one")
    spec = load_spec(run_spec)
    ws = ws or ws_url_for(rpc)

    def make_backend(addr):
        return SolanaBackend(rpc, ws, run_id, keypair, p2p_addr=addr, peer_dir=peer_dir,
                             spec=spec, by_key=bool(opts.get("iroh_relay")))

    contributor = None if identity is None else bytes(identity)
    where = f"on {rpc}" + (f" for contributor {identity}" if identity else "")
    run_client(run_id, identity_of(keypair), make_backend, where, contributor=contributor,
               **opts)
