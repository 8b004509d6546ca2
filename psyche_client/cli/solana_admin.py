"""Run-creator commands of `psyche-solana-client`: create a run on Solana, configure, pause and
resume it, inspect and tick it, grant joiners and close it; and the contributor points
commands: set a contributor's delegates, settle slots' points, print the leaderboard.
solana_client.py adds COMMANDS.

Exit codes: 0 done, 2 bad input (files, keys, options), 1 refused by the chain or unreachable."""

import asyncio
import json
import time

import click
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from psyche_coordinator_core import (
    Checkpoint,
    CheckpointKind,
    ClientState,
    CoordinatorError,
    RunConfig,
    new_run,
)
from psyche_coordinator_core.ops_json import checkpoint_to_json

from ..chain.keys import KeypairError, load_keypair, save_keypair
from ..server.state_file import StateFileError, load_run_spec, load_state_file
from .common import fail

DEFAULT_RPC = "http://127.0.0.1:8899"
DEFAULT_KEYPAIR = "~/.config/solana/id.json"
LAMPORTS_PER_SOL = 1_000_000_000
HINTS = {
    "NotAuthority": "you signed as {me}; only the run's main authority {main} may do this: "
                    "pass its --keypair",
    "NotJoinAuthority": "you signed as {me}; only the join authority {join} may grant or revoke "
                        "joiners: pass its --keypair",
    "UpdateNotHalted": "the run is running: `pause --run-id {run}` first, then update, then "
                       "`resume`",
    "CloseNotHalted": "only a halted run can be closed: `pause --run-id {run}` first",
    "CannotResume": "only a paused (or new) run can be resumed",
    "Halted": "the run is paused or finished: `resume --run-id {run}` first",
    "RunFinished": "the run has finished; it can only be closed",
    "InvalidCheckpoint": "Hub, P2P and Stored need --repo, Stored also --hash and --step; "
                         "repo and revision are <= 64 bytes",
    "AlreadyProcessed": "an identical transaction was just processed; retry in a second",
    "NotADelegate": "the node key is not among the identity's delegates: the identity runs "
                    "`set-delegates --identity-keypair <its file> --run-id {run} <node key>`",
    "TooManyDelegates": "a contributor may list at most 8 delegates",
    "WrongContributor": "the contributor account is not the one of the slot's identity: "
                        "settle with the identity the run's state lists for that slot",
    "NothingToSettle": "that slot holds no unsettled points (settled already?): `leaderboard "
                       "--run-id {run}` shows the points",
    "PointsUnsettled": "some slots still hold unsettled points: `settle --run-id {run} --all`",
    "InvalidClientIndex": "no client at that index: `show --run-id {run}` lists the slots",
}
for _name in ("AccountNotFound", "InsufficientFundsForFee", "InsufficientFundsForRent",
              "ResultWithNegativeLamports"):
    HINTS[_name] = ("the payer {me} cannot pay: fund it, e.g. `airdrop --keypair <its file> "
                    "--sol 10` (localnet/devnet); a run's accounts need ~1 SOL of rent")


class Command(click.Command):
    """Usage errors (missing or invalid options) as one line, like the others."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            fail(f"{' '.join(e.format_message().split())} (see {ctx.command_path} --help)")


class Refused(Exception):
    """The chain's state refuses the command (exit 1)."""


def signer(path, optional=False) -> Keypair:
    try:
        return load_keypair(path)
    except KeypairError as e:
        if optional:  # reading needs no key
            return Keypair()
        fail(str(e))


def pubkey(value: str, option: str) -> Pubkey:
    try:
        return Pubkey.from_string(value)
    except ValueError:
        fail(f"{option} {value!r}: not a base58 public key")


def pubkey_option(*decls, **kw):
    return click.option(*decls, default=None, metavar="PUBKEY", **kw,
                        callback=lambda ctx, p, v: v and pubkey(v, p.opts[0]))


def state_file(path, run_id=None):
    try:
        st = load_state_file(path)
        return new_run(run_id, st.config, st.run_seed, st.checkpoint) if run_id else st
    except StateFileError as e:
        fail(str(e))
    except CoordinatorError as e:
        fail(f"--run-id {run_id!r}: {e.detail}")


def spec_file(path, st):
    """The run spec of a state.toml for a run on chain (None: it declares no model, clients
    simulate training); exits 2 when it cannot be one."""
    from ..chain.program import RUN_SPEC_MAX_LEN

    try:
        spec = load_run_spec(path, st)
    except StateFileError as e:
        fail(str(e))
    if spec is not None and spec.data.kind == "server":
        fail(f"{path}: [data] kind = \"server\" needs the centralized server; on a chain use "
             "\"local\" or \"http\"")
    if spec is not None and spec.data.kind in ("local", "http"):
        spec = pin_data(path, spec)
    if spec is not None and len(spec.canonical_bytes()) > RUN_SPEC_MAX_LEN:
        fail(f"{path}: the run spec is {len(spec.canonical_bytes())} bytes as JSON, at most "
             f"{RUN_SPEC_MAX_LEN} fit in its account (fewer data URLs?)")
    return spec


def pin_data(path, spec):
    """The spec with its data manifest's hash filled in (read from the manifest when the file
    leaves it out; checked against it when it gives one); warns when it names no manifest."""
    import hashlib
    from dataclasses import replace

    from ..data.manifest import ManifestUnreachable, parse_manifest, read_manifest
    from ..data.provider import DataError

    d = spec.data
    if not d.manifest:
        click.echo(f"warning: {path} names no data manifest ([data] manifest): clients cannot "
                   "check that they read the same tokens (psyche-data manifest makes one)",
                   err=True)
        return spec
    try:
        raw = read_manifest(d.manifest)
        parse_manifest(raw, d.manifest_sha256 or None)
    except ManifestUnreachable as e:
        if not d.manifest_sha256:
            fail(f"{path}: {e}; give its hash as [data] manifest_sha256, or run create-run "
                 "where it can be read")
        click.echo(f"warning: {e}; its hash is taken as given", err=True)  # clients may reach it
        return spec
    except DataError as e:  # malformed, or not the manifest the file pins
        fail(f"{path}: {e}")
    if d.manifest_sha256:
        return spec
    digest = hashlib.sha256(raw).hexdigest()
    click.echo(f"data manifest {d.manifest}: sha256 {digest}, pinned in the run spec", err=True)
    return replace(spec, data=replace(d, manifest_sha256=digest))


async def publish_spec(s, spec) -> list:
    """Writes the spec's bytes to the run's spec account (one transaction per chunk, with
    progress) and returns the `update` instruction that names their hash (zero: no spec)."""
    if spec is None:
        return [s.c.ix_update(*s.owner(), spec_hash=bytes(32))]
    raw = spec.canonical_bytes()
    chunks = s.c.ix_set_run_spec(s.me.pubkey(), s.key, raw)
    for i, ix in enumerate(chunks, 1):
        await s.send(ix)
        click.echo(f"run spec: wrote chunk {i}/{len(chunks)} ({len(raw)} bytes)", err=True)
    return [s.c.ix_update(*s.owner(), spec_hash=spec.spec_hash())]


def rpc_url(ctx, param, url):
    if not url.startswith(("http://", "https://")):
        fail(f"--rpc {url!r}: expected an http(s):// URL")
    return url


# --rpc of every command, `train` included.
rpc_option = click.option("--rpc", envvar="PSYCHE_RPC", default=DEFAULT_RPC, show_default=True,
                          show_envvar=True, callback=rpc_url, help="Solana JSON-RPC URL.")


def chain_options(run=True):
    """--rpc and --keypair (and --run-id) on a command."""
    opts = [rpc_option,
            click.option("--keypair", "keypair_path", envvar="PSYCHE_KEYPAIR",
                         default=DEFAULT_KEYPAIR, show_default=True, show_envvar=True,
                         help="Signer and fee payer: a Solana JSON keypair file.")]
    if run:
        opts.append(click.option("--run-id", default=None,
                                 help="The run (default: run_id of --state, where it applies)."))

    def deco(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn
    return deco


class Session:
    """One command on the chain: the program client, the signer and the run's instance."""

    def __init__(self, rpc, me: Keypair, run_id=None):
        from ..chain.program import Coordinator  # anchorpy: only for commands that need it
        self.rpc, self.me, self.run_id, self.c = rpc, me, run_id, Coordinator(rpc, me)
        self.instance = self.key = self.account = None

    async def load(self):
        self.key = self.c.instance_key(self.run_id)
        self.instance = await self.c.fetch_instance(self.run_id)
        if self.instance is None:
            raise Refused(f"no run {self.run_id!r} on {self.rpc} (instance {self.key} does "
                          "not exist)")
        self.account = self.instance.coordinator_account

    async def state(self):
        return await self.c.fetch_state(self.account)

    async def send(self, *ixs, signers=()):
        return await self.c.send(ixs, signers)

    def owner(self):
        return self.me.pubkey(), self.key, self.account

    def hint(self, name):
        inst = self.instance
        return HINTS.get(name, "").format(
            me=self.me.pubkey(), run=self.run_id,
            main=inst.main_authority if inst else "", join=inst.join_authority if inst else "")


def execute(rpc, me: Keypair, body, run_id=None, load=True):
    """Runs `await body(session)`; ends with exit 1, the error's name and a hint if refused."""
    from ..chain.program import ChainError, ProgramError

    s = Session(rpc, me, run_id)

    async def go():
        try:
            if load:
                await s.load()
            return await body(s)
        finally:
            await s.c.close()

    try:
        return asyncio.run(go())
    except Refused as e:
        fail(str(e), 1)
    except ChainError as e:
        fail(f"{str(e).rstrip(': ')}\nhint: is a Solana RPC node (e.g. psyche-localnet) "
             f"listening at --rpc {rpc}?", 1)
    except (CoordinatorError, ProgramError) as e:
        if isinstance(e, CoordinatorError):
            name, where = e.code, f" ({e.detail})"
        else:  # system errors' names carry an explanation: "ResultWithNegativeLamports (...)"
            name = e.name.split(" (")[0]
            where = f" (program error {e.code})" if isinstance(e.code, int) else ""
        hint = s.hint(name)
        fail(f"refused by the chain: {name}{where}" + (f"\nhint: {hint}" if hint else ""), 1)


def run_command(name, keyless=False, check=None):
    """A command on an existing run: the chain options, then `await fn(session, **options)`
    with the run loaded. The docstring is the help. `check(**options)`, run before anything
    is read from the chain, refuses bad combinations of options (with `fail`)."""
    def deco(fn):
        def callback(rpc, keypair_path, run_id, **opts):
            if not run_id and opts.get("state_path"):
                run_id = state_file(opts["state_path"]).run_id
            if not run_id:
                fail("--run-id is required")
            if check is not None:
                check(**opts)
            execute(rpc, signer(keypair_path, keyless), lambda s: fn(s, **opts), run_id)
        callback.__click_params__ = getattr(fn, "__click_params__", [])
        return click.command(name, cls=Command, help=fn.__doc__)(chain_options()(callback))
    return deco


# ---------------------------------------------------------------------------------- show

def to_json(s: Session, st) -> dict:
    inst, rnd = s.instance, st.current_round

    def client(c):
        return {"pubkey": str(Pubkey.from_bytes(c.signer)), "p2p_identity": c.p2p_identity.hex(),
                "state": ClientState(c.state).name}
    return {
        "run_id": s.run_id, "instance": str(s.key), "coordinator_account": str(s.account),
        "main_authority": str(inst.main_authority), "join_authority": str(inst.join_authority),
        "permissionless": inst.permissionless,
        "state": {
            "run_state": st.run_state.name, "run_state_start": st.run_state_start,
            "epoch": st.epoch, "step": st.step, "pending_pause": st.pending_pause,
            "checkpoint": checkpoint_to_json(st.checkpoint),
            "spec_hash": st.spec_hash.hex(),
            "clients": [client(c) for c in st.clients],
            "pending": [client(c) for c in st.pending],
            "current_round": {"height": rnd.height, "data_index": rnd.data_index,
                              "random_seed": rnd.random_seed,
                              "participants": rnd.participant_indices(),
                              "witnesses": [w.index for w in rnd.witnesses]},
            "config": st.config.to_dict()}}


def render(d: dict) -> str:
    st, ck, rnd = d["state"], d["state"]["checkpoint"], d["state"]["current_round"]
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st["run_state_start"]))
    rows = [("instance", d["instance"]), ("coordinator account", d["coordinator_account"]),
            ("main authority", d["main_authority"]), ("join authority", d["join_authority"]),
            ("joining", "permissionless (anyone)" if d["permissionless"]
             else "permissioned (the join authority's grantees)"),
            ("run state", st["run_state"] + (f" since {since}" if st["run_state_start"] else "")
             + (", pause pending" if st["pending_pause"] else "")),
            ("epoch, step", f"{st['epoch']}, {st['step']} (of {st['config']['total_steps']})"),
            ("checkpoint", " ".join([ck["kind"], ck["repo"]] + [ck["revision"]] * bool(
                ck["revision"]))),
            ("spec", "none (simulated training)" if not int(st["spec_hash"], 16)
             else st["spec_hash"]),
            ("clients", f"{len(st['clients'])} this epoch, {len(st['pending'])} for the next")]
    rows += [("", f"{c['pubkey']} {c['state']}") for c in st["clients"]]
    rows += [("", f"{c['pubkey']} pending") for c in st["pending"]]
    rows.append(("current round", f"height {rnd['height']}, data index {rnd['data_index']}, "
                 f"{len(rnd['participants'])} participants, {len(rnd['witnesses'])} witnesses"))
    rows += [("config" if i == 0 else "", f"{k} = {v}")
             for i, (k, v) in enumerate(st["config"].items())]
    return "\n".join([f"run {d['run_id']!r}"] + [f"  {k:<20} {v}" for k, v in rows])


async def emit(s: Session, as_json=False):
    d = to_json(s, await s.state())
    click.echo(json.dumps(d, indent=2) if as_json else render(d))


# ------------------------------------------------------------------------------ commands

@click.command("new-keypair", cls=Command)
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing file (its key is lost).")
def new_keypair(path, force):
    """Write a fresh Solana keypair file (JSON) and print its public key."""
    kp = Keypair()
    try:
        written = save_keypair(kp, path, overwrite=force)
    except KeypairError as e:
        fail(f"{e} (pass --force to replace it)")
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    click.echo(f"wrote {written}", err=True)
    click.echo(str(kp.pubkey()))


@click.command(cls=Command)
@chain_options(run=False)
@pubkey_option("--to", help="Public key to fund (default: --keypair's).")
@click.option("--sol", type=click.FloatRange(min=0, min_open=True), default=10.0,
              show_default=True, help="Amount in SOL.")
def airdrop(rpc, keypair_path, to, sol):
    """Request an airdrop of SOL to --to, or to --keypair's public key (localnet, devnet and
    test validators only)."""
    target = to or signer(keypair_path).pubkey()

    async def body(s):
        await s.c.airdrop(target, int(sol * LAMPORTS_PER_SOL))
        balance = (await s.c.client.get_balance(target)).value / LAMPORTS_PER_SOL
        click.echo(f"airdropped {sol:g} SOL to {target}; balance {balance:g} SOL")
    execute(rpc, Keypair(), body, load=False)


@click.command("create-run", cls=Command)
@chain_options()
@click.option("--state", "state_path", required=True, type=click.Path(dir_okay=False),
              help="The run's state.toml (run_id, run_seed, [config], [checkpoint]).")
@pubkey_option("--join-authority", help="Who grants joiners on a permissioned run (default: "
               "the signer).")
@click.option("--permissioned", is_flag=True,
              help="Only clients the join authority authorizes may join (default: anyone).")
@click.option("--start/--no-start", default=True, show_default=True,
              help="Resume the run at once (WaitingForMembers); else it stays Uninitialized.")
def create_run(rpc, keypair_path, run_id, state_path, join_authority, permissioned, start):
    """Create a run from a state.toml: allocate the coordinator account (rent-exempt, ~1 SOL)
    and init_coordinator with the file's config and run_seed, set its [checkpoint] unless
    Dummy, write its run spec ([model], [optimizer], [data], [p2p], the [checkpoint] store) to
    the run's spec account with its hash, and start it. Clients need nothing but the RPC URL
    and the run id: they read the spec from the chain. The signer becomes the main authority.
    --run-id overrides the file's run_id."""
    st, me, account = state_file(state_path, run_id), signer(keypair_path), Keypair()
    spec = spec_file(state_path, st)

    async def body(s):
        from ..chain.program import ACCOUNT_SPACE
        c, s.key = s.c, s.c.instance_key(st.run_id)
        if await c.fetch_instance(st.run_id) is not None:
            raise Refused(f"run id {st.run_id!r} is taken: instance {s.key} exists "
                          "(AccountAlreadyInUse)\nhint: set another run_id (or --run-id), or "
                          "`close-run` the old run")
        owner = (me.pubkey(), s.key, account.pubkey())
        ixs = [c.ix_create_account(account.pubkey(), await c.rent_exempt(ACCOUNT_SPACE)),
               c.ix_init_coordinator(st.run_id, account.pubkey(), me.pubkey(),
                                     join_authority or me.pubkey(), not permissioned, st.config,
                                     st.run_seed)]
        if st.checkpoint.kind != CheckpointKind.Dummy:
            ixs.append(c.ix_update(*owner, checkpoint=st.checkpoint))
        start_ixs = [c.ix_set_paused(*owner, False)] if start else []
        sig = await s.send(*ixs, *([] if spec else start_ixs), signers=[account])
        click.echo(f"created run {st.run_id!r} (transaction {sig})")
        if spec is not None:  # the spec, then its hash and the start in one transaction
            s.account = account.pubkey()
            await s.send(*await publish_spec(s, spec), *start_ixs)
            click.echo(f"run spec {spec.spec_hash().hex()} ({len(spec.canonical_bytes())} "
                       "bytes)")
        await s.load()
        await emit(s)
    execute(rpc, me, body, st.run_id, load=False)


@run_command("update-config")
@click.option("--state", "state_path", required=True, type=click.Path(dir_okay=False),
              help="state.toml whose [config] becomes the run's (its run_id is the default "
                   "--run-id).")
async def update_config(s, state_path):
    """Replace the run's config with the [config] of a state.toml. The run must be halted:
    `pause` it first."""
    await s.send(s.c.ix_update(*s.owner(), config=state_file(state_path).config))
    click.echo(f"updated the config of run {s.run_id!r}")
    await emit(s)


@run_command("set-spec")
@click.option("--state", "state_path", required=True, type=click.Path(dir_okay=False),
              help="state.toml whose [model], [optimizer], [data], [p2p] and [checkpoint] store "
                   "become the run's spec (its run_id is the default --run-id); without "
                   "[model] the run declares none and its clients simulate training.")
async def set_spec(s, state_path):
    """Replace the run's spec: write it to the run's spec account and its hash to the state.
    The run must be halted (`pause` it first); clients that join later train the new spec,
    those already running stop."""
    if not (await s.state()).run_state.halted:
        raise Refused(f"the run is running: refused (UpdateNotHalted)\nhint: "
                      f"{s.hint('UpdateNotHalted')}")
    spec = spec_file(state_path, state_file(state_path))
    await s.send(*await publish_spec(s, spec))
    click.echo(f"run {s.run_id!r} now trains spec "
               + (f"{spec.spec_hash().hex()}" if spec else "none (simulated training)"))
    await emit(s)


def param_hash_option(ctx, param, value):
    """--hash: a recorded snapshot's parameter hash, 64 hex digits (32 bytes)."""
    if not value:
        return None
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) != 32 or len(value) != 64:
        raise click.BadParameter(f"{value!r}: expected 64 hex digits (the snapshot's parameter "
                                 "hash, as its manifest and `psyche-snapshot list` show it)")
    return raw


def checked_checkpoint(ctx, param, kind):
    ck = Checkpoint(CheckpointKind[kind], ctx.params.get("repo", ""),
                    ctx.params.get("revision", ""), ctx.params.get("param_hash") or bytes(32),
                    ctx.params.get("step") or 0)
    if ck.kind != CheckpointKind.Stored and (ctx.params.get("param_hash")
                                             or ctx.params.get("step")):
        fail(f"checkpoint: --hash and --step are for --kind Stored, not {kind}")
    if ck.kind == CheckpointKind.Stored and not ctx.params.get("param_hash"):
        fail("checkpoint: --kind Stored needs --hash (the snapshot's parameter hash) and --step")
    try:  # the core's own checks, before spending a transaction
        new_run("check", RunConfig(), 0, ck)
    except CoordinatorError as e:
        fail(f"checkpoint: {e.detail}")
    return ck


@run_command("set-checkpoint")
@click.option("--repo", default="", is_eager=True,
              help="Checkpoint repository (Hub, P2P); Stored: the snapshot's location in the "
                   "run's store (its manifest's SHA-256).")
@click.option("--revision", default="", is_eager=True, help="Revision in the repository.")
@click.option("--hash", "param_hash", default=None, is_eager=True, callback=param_hash_option,
              metavar="HEX64", help="Stored: the snapshot's parameter hash (64 hex digits).")
@click.option("--step", type=click.IntRange(0, 2**32 - 1), default=0, is_eager=True,
              help="Stored: the step the snapshot's parameters train (its manifest's step).")
@click.option("--kind", "checkpoint", required=True, callback=checked_checkpoint,
              type=click.Choice([k.name for k in CheckpointKind]),
              help="Dummy: from the run seed; Hub: the repo; P2P: from peers; Stored: the "
                   "snapshot recorded at --repo in the run's store, checked by --hash.")
async def set_checkpoint(s, repo, revision, param_hash, step, checkpoint):
    """Set where joiners load the model from. The run must be halted: `pause` it first."""
    await s.send(s.c.ix_update(*s.owner(), checkpoint=checkpoint))
    click.echo(f"updated the checkpoint of run {s.run_id!r}")
    await emit(s)


async def set_paused(s, paused):
    before = (await s.state()).run_state
    await s.send(s.c.ix_set_paused(*s.owner(), paused))
    after = await s.state()
    click.echo(f"run {s.run_id!r}: {before.name} -> {after.run_state.name}")
    if after.pending_pause:
        click.echo("pause pending: the run pauses after this round's cooldown")


@run_command("pause")
async def pause(s):
    """Pause the run (main authority): clients are withdrawn; mid-round, after the cooldown."""
    await set_paused(s, True)


@run_command("resume")
async def resume(s):
    """Resume a paused (or new) run (main authority): it waits for members again."""
    await set_paused(s, False)


@run_command("show", keyless=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead.")
async def show(s, as_json):
    """Show the run: its instance (authorities, who may join, account) and state (run state,
    epoch, step, clients, current round, config). Needs no keypair."""
    await emit(s, as_json)


@run_command("tick")
async def tick(s):
    """Tick the run (anyone may; the signer pays the fee): phase changes that are due happen
    now. Prints the run state before and after."""
    before = await s.state()
    await s.send(s.c.ix_tick(s.me.pubkey(), s.key, s.account))
    after = await s.state()
    click.echo(f"run {s.run_id!r}: {before.run_state.name} (step {before.step}) -> "
               f"{after.run_state.name} (step {after.step})")


async def grant(s, grantee, authorize):
    auth, me = s.c.authorization_key(s.key, grantee), s.me.pubkey()
    exists = await s.c.get_account_data(auth) is not None
    if authorize and exists:
        click.echo(f"{grantee} is already authorized to join {s.run_id!r} ({auth})")
    elif not authorize and not exists:
        raise Refused(f"{grantee} has no authorization for run {s.run_id!r}; nothing to revoke")
    else:
        await s.send(s.c.ix_authorize_joiner(me, s.key, grantee) if authorize
                     else s.c.ix_revoke_joiner(me, s.key, grantee, me))
        click.echo(f"{'authorized' if authorize else 'revoked'} {grantee} for run "
                   f"{s.run_id!r} ({auth})")
    if authorize and s.instance.permissionless:
        click.echo("note: the run is permissionless: anyone may join anyway")


@run_command("authorize")
@pubkey_option("--grantee", required=True, help="The client's public key.")
async def authorize(s, grantee):
    """Authorize --grantee to join a permissioned run (signer: the join authority, which pays
    the authorization account's rent)."""
    await grant(s, grantee, True)


@run_command("revoke")
@pubkey_option("--grantee", required=True, help="The client's public key.")
async def revoke(s, grantee):
    """Revoke --grantee's authorization (signer: the join authority, which gets the rent
    back). Clients already joined stay."""
    await grant(s, grantee, False)


@run_command("close-run")
@pubkey_option("--spill", help="Who receives the rent (default: the signer).")
async def close_run(s, spill):
    """Close a halted run (`pause` it first; main authority): free_run_spec closes its spec
    account when it has one, free_coordinator the instance and the coordinator account, in one
    transaction; their rent goes to --spill."""
    dest, lamports, ixs = spill or s.me.pubkey(), 0, []
    spec_key = s.c.run_spec_key(s.key)
    if await s.c.get_account_data(spec_key) is not None:
        ixs.append(s.c.ix_free_run_spec(s.me.pubkey(), s.key, s.account, dest))
    for key in (s.key, s.account, spec_key):
        lamports += (await s.c.client.get_balance(key)).value
    await s.send(*ixs, s.c.ix_free_coordinator(s.me.pubkey(), s.key, s.account, dest))
    click.echo(f"closed run {s.run_id!r}: {lamports / LAMPORTS_PER_SOL:g} SOL returned to {dest}")


# ------------------------------------------------------------------------------ points

@click.command("set-delegates", cls=Command)
@chain_options()
@click.option("--identity-keypair", "identity_path", required=True,
              type=click.Path(dir_okay=False),
              help="The contributor identity's keypair file: it signs, and its points are the "
                   "ones its delegates earn.")
@click.argument("delegates", nargs=-1, metavar="DELEGATE_PUBKEY...")
def set_delegates(rpc, keypair_path, run_id, identity_path, delegates):
    """Let up to 8 node keys (DELEGATE_PUBKEY...) join the run as the identity of
    --identity-keypair (`train --identity <its public key>`): the points they earn add up
    under that identity. Replaces the identity's list of delegates. --keypair pays the fee
    and, the first time, the contributor account's rent (default: the identity itself)."""
    if not run_id:
        fail("--run-id is required")
    if not delegates:
        fail("name at least one DELEGATE_PUBKEY (see set-delegates --help)")
    from ..chain.program import MAX_DELEGATES
    keys = [pubkey(d, "DELEGATE_PUBKEY") for d in delegates]
    if len(keys) > MAX_DELEGATES:
        fail(f"TooManyDelegates: {len(keys)} delegates; a contributor may list at most "
             f"{MAX_DELEGATES}")
    if len(set(keys)) != len(keys):
        fail("a DELEGATE_PUBKEY is listed twice")
    ident = signer(identity_path)
    ctx = click.get_current_context()
    explicit = ctx.get_parameter_source("keypair_path") not in (
        click.core.ParameterSource.DEFAULT, None)
    payer = signer(keypair_path) if explicit else ident

    async def body(s):
        me = ident.pubkey()
        extra = [ident] if ident.pubkey() != payer.pubkey() else []
        await s.send(s.c.ix_set_delegates(me, s.key, keys), signers=extra)
        got = await s.c.fetch_contributor(s.key, me)
        listed = ", ".join(map(str, got.delegates)) if got else "?"
        click.echo(f"contributor {me} of run {s.run_id!r}: delegates {listed}")
    execute(rpc, payer, body, run_id)


def check_settle(index, settle_all):
    if (index is None) == (not settle_all):
        fail("pass exactly one of --index N and --all (see settle --help)")


@run_command("settle", check=check_settle)
@click.option("--index", type=click.IntRange(0, 255), default=None,
              help="The client slot to settle (`show` lists them in order).")
@click.option("--all", "settle_all", is_flag=True,
              help="Every slot that holds unsettled points.")
async def settle(s, index, settle_all):
    """Move client slots' points into their identities' contributor accounts (settle_points;
    anyone may, the signer pays the fees). Clients settle their own slots when an epoch's
    rounds are over; this is the crank for slots nobody settled (clients that left or died).
    A new epoch starts only once every slot is settled. Pass --index N or --all."""
    st = await s.state()
    if index is not None and index >= len(st.clients):
        raise Refused(f"InvalidClientIndex: no client at index {index}; run {s.run_id!r} has "
                      f"{len(st.clients)} slot(s) this epoch (`show --run-id {s.run_id}`)")
    todo = [i for i, c in enumerate(st.clients) if c.unsettled] if settle_all else [index]
    if not todo:
        click.echo(f"run {s.run_id!r}: no slot holds unsettled points")
        return
    settled = 0
    for i in todo:
        c = st.clients[i]
        try:
            await s.send(s.c.ix_settle_points(s.me.pubkey(), s.key, s.account, i,
                                              Pubkey.from_bytes(c.identity)))
        except CoordinatorError as e:
            if settle_all and e.code == "NothingToSettle":  # a client settled it meanwhile
                continue
            raise
        settled += 1
        click.echo(f"settled slot {i}: {c.presence} rounds, {c.sequences} sequences -> "
                   f"{Pubkey.from_bytes(c.identity)}")
    click.echo(f"run {s.run_id!r}: settled {settled} slot(s)")


@run_command("leaderboard", keyless=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead.")
async def leaderboard(s, as_json):
    """The run's contributors ranked by points: presence (rounds, points), compute (sequences,
    tokens, FLOPs, points) and total, from the contributor accounts plus what the client slots
    hold unsettled now (live during an epoch). Needs no keypair."""
    from psyche_coordinator_core import with_unsettled

    from .leaderboard import render_json, render_table
    st = await s.state()
    ledger = {c.points.identity: c.points for c in await s.c.contributors(s.key)}
    ledger = {k: p for k, p in ledger.items() if p.presence_rounds or p.sequences or p.total}
    ledger = with_unsettled(ledger, st)
    click.echo(render_json(ledger, st.config) if as_json else render_table(ledger, st.config))


COMMANDS = [new_keypair, airdrop, create_run, update_config, set_spec, set_checkpoint, pause,
            resume, show, tick, authorize, revoke, close_run, set_delegates, settle, leaderboard]


def admin_commands(group):
    """Adds the run-creator commands to a click group."""
    for cmd in COMMANDS:
        group.add_command(cmd)
    return group
