"""`psyche-solana-client train`: a contributor's daemon for a run on Solana."""

import asyncio
from urllib.parse import urlparse

import click

from ..backends.solana import SolanaBackend
from ..chain.keys import KeypairError, identity_of, load_keypair
from ..server.state_file import StateFileError, load_state_file
from .common import client_options, fail, run_client
from .solana_admin import pubkey_option, rpc_option, spec_file


def ws_url_for(rpc_url: str) -> str:
    """A validator's PubSub listens on the RPC port + 1 (8899 -> 8900)."""
    u = urlparse(rpc_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        fail(f"--rpc {rpc_url!r}: expected http://host:port")
    port = (u.port or (443 if u.scheme == "https" else 80)) + 1
    return f"{'wss' if u.scheme == 'https' else 'ws'}://{u.hostname}:{port}"


def chain_spec(rpc, keypair, run_id, own_path):
    """(spec_hash, RunSpec or None) of the run, read from the chain and checked against its
    hash; with --run-spec, that file's spec must be the same (SpecMismatch). Exits 1 when the
    chain cannot be read or its spec cannot be used, 2 for a bad or different --run-spec."""
    from psyche_coordinator_core import LayoutError

    from ..chain.program import ChainError, Coordinator
    from ..chain.run_spec import RunSpecError, SpecMismatch, check_own_spec, fetch_run_spec

    own = None
    if own_path is not None:
        try:
            own = spec_file(own_path, load_state_file(own_path))
        except StateFileError as e:
            fail(str(e))

    async def go():
        c = Coordinator(rpc, keypair)
        try:
            return await fetch_run_spec(c, run_id)
        finally:
            await c.close()
    try:
        spec_hash, spec = asyncio.run(go())
        if own_path is not None:
            check_own_spec(own, spec_hash, run_id)
    except SpecMismatch as e:
        fail(str(e))
    except (RunSpecError, ChainError, LayoutError) as e:  # LayoutVersionMismatch among them
        fail(str(e), 1)
    return spec_hash, spec


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
                   "a relay (the run's, or --iroh-relay): then a peer's key on chain is all it "
                   "takes to reach it.")
@click.option("--run-spec", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Not needed: the client trains the spec the run publishes on chain. Given, "
                   "this state.toml's spec must be the run's, else the client refuses "
                   "(SpecMismatch): a check that you train what you think you train.")
@pubkey_option("--identity", help="The contributor identity to earn points for (a public key "
               "whose owner listed --keypair's key as a delegate: `set-delegates`); default: "
               "--keypair's own key.")
@client_options
def train(rpc, ws, keypair_path, run_id, peer_dir, run_spec, identity, **opts):
    try:
        keypair = load_keypair(keypair_path)
    except KeypairError as e:
        fail(str(e))
    ws = ws or ws_url_for(rpc)
    spec_hash, spec = chain_spec(rpc, keypair, run_id, run_spec)
    if not opts.get("iroh_relay") and spec is not None and spec.p2p.relays:
        opts["iroh_relay"] = spec.p2p.relays[0]
    if not opts.get("stun") and spec is not None:
        opts["stun"] = spec.p2p.stun
    by_key = bool(opts.get("iroh_relay") or opts.get("p2p_peers"))
    if peer_dir is None and not by_key:
        fail("a chain client finds its peers through a relay (the run spec's [p2p] relays, or "
             "--iroh-relay URL), peers at known addresses (--p2p-peer) or a shared peer "
             "directory (--peer-dir): give one")

    def make_backend(addr):
        return SolanaBackend(rpc, ws, run_id, keypair, p2p_addr=addr, peer_dir=peer_dir,
                             spec=None if spec is None else spec.to_dict(),
                             spec_hash=spec_hash, by_key=by_key)

    contributor = None if identity is None else bytes(identity)
    where = f"on {rpc}" + (f" for contributor {identity}" if identity else "")
    run_client(run_id, identity_of(keypair), make_backend, where, contributor=contributor,
               **opts)
