"""The coordinator program from Python: addresses, instructions (anchorpy over the legacy IDL),
sending and confirming transactions, decoding accounts, and errors by name.

Works against any Solana JSON-RPC: psyche-localnet, or solana-test-validator / devnet where the
program is deployed with `anchor deploy`."""

import asyncio
import base64
import hashlib
import struct
from dataclasses import dataclass

import httpx
from anchorpy import Context, Program, Provider, Wallet
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solana.rpc.core import RPCException
from solana.rpc.types import TxOpts
from solders.compute_budget import set_compute_unit_limit
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.rpc.errors import SendTransactionPreflightFailureMessage
from solders.system_program import ID as SYSTEM_PROGRAM_ID
from solders.system_program import CreateAccountParams, create_account
from solders.transaction import Transaction
from solders.transaction_status import (
    InstructionErrorCustom,
    TransactionConfirmationStatus,
    TransactionErrorInstructionError,
)

from psyche_coordinator_core import (
    STATE_SIZE,
    CoordinatorError,
    LayoutError,
    Points,
    RunConfig,
    from_bytes,
)
from psyche_coordinator_core.canonical import layout_version_of
from psyche_coordinator_core.constants import LAYOUT_VERSION

from . import idl as idl_files

COORDINATOR_SEED = b"coordinator"
AUTHORIZATION_SEED = b"authorization"
CONTRIBUTOR_SEED = b"contributor"
RUN_SPEC_SEED = b"run_spec"
RUN_SPEC_MAX_LEN = 8192  # the program's RUN_SPEC_MAX_LEN
RUN_SPEC_CHUNK = 800  # spec bytes per set_run_spec transaction (under the 1232-byte packet)
MAX_DELEGATES = 8
ACCOUNT_SPACE = 8 + STATE_SIZE
CORE_ERRORS_START, PROGRAM_ERRORS_START = 6000, 6100
# Under the VM the heaviest instructions at 256 clients (the end of a round, evidence: about
# 265k units, benchmarks/compute_units) pass the default 200k: ask for the most.
HEAVY_COMPUTE = 1_400_000
CONFIRM_TIMEOUT = 30.0
# statuses at or past the client's commitment (Confirmed)
_CONFIRMED = (TransactionConfirmationStatus.Confirmed, TransactionConfirmationStatus.Finalized)
# The system program's errors that creating a run can meet.
SYSTEM_ERRORS = {0: "AccountAlreadyInUse (the run id or account is taken)",
                 1: "ResultWithNegativeLamports (the payer cannot pay)"}


def account_discriminator(name: str) -> bytes:
    return hashlib.sha256(f"account:{name}".encode()).digest()[:8]


COORDINATOR_DISCRIMINATOR = account_discriminator("CoordinatorAccount")
CONTRIBUTOR_DISCRIMINATOR = account_discriminator("Contributor")
# A Contributor account (Anchor borsh): discriminator, bump u8, coordinator_instance, identity,
# delegates Vec<Pubkey> (u32 length, at most MAX_DELEGATES), then six u64 (the Points counts).
CONTRIBUTOR_INSTANCE_OFFSET = 8 + 1
_POINTS = struct.Struct("<6Q")


@dataclass(frozen=True)
class Contributor:
    """A contributor account: one identity's points in one run and the node keys that may act
    for it."""

    address: Pubkey
    coordinator_instance: Pubkey
    points: Points  # points.identity: the identity's 32 bytes
    delegates: tuple = ()  # Pubkeys

    @property
    def identity(self) -> Pubkey:
        return Pubkey.from_bytes(self.points.identity)


def decode_contributor(data: bytes, address: Pubkey = None) -> Contributor:
    """A Contributor account's data (discriminator included); ChainError if it is none."""
    data = bytes(data)
    if data[:8] != CONTRIBUTOR_DISCRIMINATOR:
        raise ChainError(f"{address or 'the account'} is not a contributor account")
    try:
        at = CONTRIBUTOR_INSTANCE_OFFSET
        instance, identity = data[at:at + 32], data[at + 32:at + 64]
        at += 64
        (count,) = struct.unpack_from("<I", data, at)
        if count > MAX_DELEGATES:
            raise ValueError(f"{count} delegates")
        at += 4
        if len(data) < at + 32 * count + _POINTS.size:
            raise ValueError(f"{len(data)} bytes")
        delegates = tuple(Pubkey.from_bytes(data[at + 32 * i:at + 32 * (i + 1)])
                          for i in range(count))
        at += 32 * count
        counts = _POINTS.unpack_from(data, at)
    except (struct.error, ValueError) as e:
        raise ChainError(f"malformed contributor account {address or ''}: {e}") from None
    return Contributor(address, Pubkey.from_bytes(instance), Points(identity, *counts),
                       delegates)


class ChainError(Exception):
    """The chain could not be reached, or a transaction did not confirm in time."""


class LayoutVersionMismatch(LayoutError):
    """The coordinator account was written in another layout version than this client reads:
    decoding it would misread every field after the change, so the client stops."""

    def __init__(self, version: int):
        super().__init__(f"LayoutVersionMismatch: the coordinator account has layout version "
                         f"{version}, this client reads version {LAYOUT_VERSION}: upgrade the "
                         f"client (or the program and the account)")
        self.version = version


class ProgramError(Exception):
    """The program (or the runtime) refused a transaction: `name` is the named error."""

    def __init__(self, name: str, code, detail: str = ""):
        super().__init__(f"{name}" + (f" ({code})" if code is not None else "") +
                         (f": {detail}" if detail else ""))
        self.name, self.code, self.detail = name, code, detail


def _plain(err) -> str:
    """solders prints fieldless errors as "TransactionErrorFieldless.AlreadyProcessed"."""
    return str(err).rsplit(".", 1)[-1]


def run_id_seed(run_id: str) -> bytes:
    return run_id.encode()[:32]


class Coordinator:
    """One program on one RPC endpoint; `payer` pays for and signs what it sends."""

    def __init__(self, rpc_url: str, payer: Keypair, program_id: Pubkey = None):
        self.rpc_url = rpc_url
        self.client = AsyncClient(rpc_url, commitment=Confirmed, timeout=30)
        self.payer = payer
        self.idl = idl_files.load_idl()
        self.program_id = program_id or idl_files.program_id()
        self.program = Program(self.idl, self.program_id, Provider(self.client, Wallet(payer)))
        self._error_names = {e.code: e.name for e in self.idl.errors}

    async def close(self):
        await self.client.close()

    # ---- addresses
    def instance_key(self, run_id: str) -> Pubkey:
        return Pubkey.find_program_address([COORDINATOR_SEED, run_id_seed(run_id)],
                                           self.program_id)[0]

    def authorization_key(self, instance: Pubkey, grantee: Pubkey) -> Pubkey:
        return Pubkey.find_program_address([AUTHORIZATION_SEED, bytes(instance), bytes(grantee)],
                                           self.program_id)[0]

    def contributor_key(self, instance: Pubkey, identity: Pubkey) -> Pubkey:
        """The contributor account of `identity` in the run of `instance`."""
        return Pubkey.find_program_address([CONTRIBUTOR_SEED, bytes(instance), bytes(identity)],
                                           self.program_id)[0]

    def run_spec_key(self, instance: Pubkey) -> Pubkey:
        """The run spec account of the run of `instance`."""
        return Pubkey.find_program_address([RUN_SPEC_SEED, bytes(instance)], self.program_id)[0]

    # ---- reading
    async def get_account_data(self, key: Pubkey):
        try:
            resp = await self.client.get_account_info(key, encoding="base64")
        except Exception as e:  # httpx and solana-py raise many kinds; all mean "unreachable"
            raise ChainError(f"cannot read {key} from {self.rpc_url}: {e}") from None
        return None if resp.value is None else bytes(resp.value.data)

    async def fetch_instance(self, run_id: str):
        """The run's CoordinatorInstance (authorities, account), or None if there is no run."""
        data = await self.get_account_data(self.instance_key(run_id))
        if data is None:
            return None
        return self.program.coder.accounts.decode(data)

    def decode_state(self, data: bytes):
        """The state in a coordinator account's data. The layout version is read first (it
        sits at the same offset in every version): another one raises LayoutVersionMismatch,
        whatever the account's size."""
        if data[:8] != COORDINATOR_DISCRIMINATOR:
            raise ChainError("not an initialized coordinator account")
        version = layout_version_of(data[8:])
        if version and version != LAYOUT_VERSION:
            raise LayoutVersionMismatch(version)
        if len(data) != ACCOUNT_SPACE:
            raise ChainError(f"coordinator account of {len(data)} bytes, expected {ACCOUNT_SPACE}")
        return from_bytes(data[8:])

    async def fetch_state(self, account: Pubkey):
        data = await self.get_account_data(account)
        if data is None:
            raise ChainError(f"coordinator account {account} does not exist")
        return self.decode_state(data)

    async def fetch_run_spec(self, instance: Pubkey):
        """The bytes the run's spec account holds, or None if it has none (the caller checks
        them against the state's spec_hash)."""
        data = await self.get_account_data(self.run_spec_key(instance))
        if data is None:
            return None
        if data[:8] != account_discriminator("RunSpec") or len(data) < 45:
            raise ChainError("not a run spec account")
        n = struct.unpack_from("<I", data, 41)[0]
        if 45 + n > len(data):
            raise ChainError(f"run spec account claims {n} bytes, holds {len(data) - 45}")
        return data[45:45 + n]

    async def fetch_contributor(self, instance: Pubkey, identity: Pubkey):
        """`identity`'s Contributor in the run of `instance`, or None if it has no account."""
        key = self.contributor_key(instance, identity)
        data = await self.get_account_data(key)
        return None if data is None else decode_contributor(data, key)

    async def contributors(self, instance: Pubkey) -> list:
        """Every Contributor of the run of `instance` (getProgramAccounts, filtered by the
        account's discriminator and its coordinator_instance), by identity."""
        def memcmp(offset, raw):
            return {"memcmp": {"offset": offset, "bytes": base64.b64encode(raw).decode(),
                               "encoding": "base64"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "getProgramAccounts", "params": [
            str(self.program_id), {"encoding": "base64", "commitment": "confirmed", "filters": [
                memcmp(0, CONTRIBUTOR_DISCRIMINATOR),
                memcmp(CONTRIBUTOR_INSTANCE_OFFSET, bytes(instance))]}]}
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                reply = (await http.post(self.rpc_url, json=body)).json()
        except Exception as e:  # httpx raises many kinds; all mean "unreachable"
            raise ChainError(f"cannot list contributors at {self.rpc_url}: {e}") from None
        if "error" in reply:
            raise ChainError(f"getProgramAccounts at {self.rpc_url}: {reply['error']}")
        result = reply.get("result")
        if isinstance(result, dict):  # withContext
            result = result.get("value")
        out = []
        for item in result or []:
            key = Pubkey.from_string(item["pubkey"])
            data = base64.b64decode(item["account"]["data"][0])
            out.append(decode_contributor(data, key))
        return sorted(out, key=lambda c: c.points.identity)

    # ---- instructions
    def _ix(self, name: str, *args, accounts: dict) -> Instruction:
        return self.program.instruction[name](*args, ctx=Context(accounts=accounts))

    def _owner(self, authority: Pubkey, instance: Pubkey, account: Pubkey) -> dict:
        return {"authority": authority, "coordinator_instance": instance,
                "coordinator_account": account}

    def _user(self, user: Pubkey, instance: Pubkey, account: Pubkey) -> dict:
        return {"user": user, "coordinator_instance": instance, "coordinator_account": account}

    def config_arg(self, config: RunConfig):
        return self.program.type["RunConfigParams"](**config.to_dict())

    def checkpoint_arg(self, checkpoint):
        kind = self.program.type["CheckpointKindParam"]
        variant = {0: kind.Dummy, 1: kind.Hub, 2: kind.P2P, 3: kind.Stored}[int(checkpoint.kind)]
        return self.program.type["CheckpointParams"](
            kind=variant(), repo=checkpoint.repo, revision=checkpoint.revision,
            hash=list(checkpoint.hash), step=checkpoint.step)

    def ix_create_account(self, account: Pubkey, lamports: int) -> Instruction:
        return create_account(CreateAccountParams(
            from_pubkey=self.payer.pubkey(), to_pubkey=account, lamports=lamports,
            space=ACCOUNT_SPACE, owner=self.program_id))

    def ix_init_coordinator(self, run_id, account, main_authority, join_authority,
                            permissionless, config: RunConfig, run_seed: int) -> Instruction:
        return self._ix("init_coordinator", run_id, main_authority, join_authority,
                        permissionless, self.config_arg(config), run_seed,
                        accounts={"payer": self.payer.pubkey(),
                                  "coordinator_instance": self.instance_key(run_id),
                                  "coordinator_account": account,
                                  "system_program": SYSTEM_PROGRAM_ID})

    def ix_update(self, authority, instance, account, config=None, checkpoint=None,
                  spec_hash: bytes = None):
        return self._ix("update", None if config is None else self.config_arg(config),
                        None if checkpoint is None else self.checkpoint_arg(checkpoint),
                        None if spec_hash is None else list(spec_hash),
                        accounts=self._owner(authority, instance, account))

    def ix_set_run_spec(self, authority, instance, spec: bytes) -> list:
        """The set_run_spec instructions that write `spec` (at most RUN_SPEC_MAX_LEN bytes) into
        the run's spec account, one chunk each (the first creates the account, `authority`
        paying its rent); `update(spec_hash=...)` then makes clients use them."""
        if len(spec) > RUN_SPEC_MAX_LEN:
            raise ValueError(f"the run spec is {len(spec)} bytes; at most {RUN_SPEC_MAX_LEN}")
        accounts = {"authority": authority, "coordinator_instance": instance,
                    "run_spec": self.run_spec_key(instance), "system_program": SYSTEM_PROGRAM_ID}
        return [self._ix("set_run_spec", len(spec), at, spec[at:at + RUN_SPEC_CHUNK],
                         accounts=accounts)
                for at in range(0, max(len(spec), 1), RUN_SPEC_CHUNK)]

    def ix_set_paused(self, authority, instance, account, paused: bool):
        return self._ix("set_paused", paused, accounts=self._owner(authority, instance, account))

    def ix_join_run(self, user, instance, account, p2p_identity: bytes, authorization=None,
                    identity: Pubkey = None):
        """`user` joins with `p2p_identity`, acting for the contributor `identity` (default:
        itself; else `user` must be one of its delegates, NotADelegate). On a permissioned run
        `authorization` is the identity's JoinAuthorization. Joining as itself creates the
        user's contributor account (the user pays its rent)."""
        identity = identity or user
        accounts = self._user(user, instance, account)
        # Anchor's convention for an absent optional account: the program id in its place.
        accounts["authorization"] = authorization or self.program_id
        accounts["contributor"] = self.contributor_key(instance, identity)
        accounts["system_program"] = SYSTEM_PROGRAM_ID
        return self._ix("join_run", bytes(p2p_identity), identity, accounts=accounts)

    def ix_set_delegates(self, identity: Pubkey, instance, delegates):
        """`identity` (a signer) lets `delegates` (at most 8 node keys) join the run as it;
        replaces the list. The payer pays the contributor account's rent if it is new."""
        delegates = [Pubkey.from_bytes(bytes(d)) for d in delegates]
        return self._ix("set_delegates", delegates, accounts={
            "payer": self.payer.pubkey(), "identity": identity,
            "coordinator_instance": instance,
            "contributor": self.contributor_key(instance, identity),
            "system_program": SYSTEM_PROGRAM_ID})

    def ix_settle_points(self, user, instance, account, index: int, identity: Pubkey):
        """Moves slot `index`'s points to its identity's contributor account (anyone may)."""
        identity = Pubkey.from_bytes(bytes(identity))
        return self._ix("settle_points", index, identity, accounts={
            **self._user(user, instance, account),
            "contributor": self.contributor_key(instance, identity)})

    def ix_tick(self, user, instance, account):
        return self._ix("tick", accounts=self._user(user, instance, account))

    def ix_witness(self, user, instance, account, index, step, participant_bloom,
                   broadcast_bloom, broadcast_merkle, param_hash):
        return self._ix("witness", index, step, bytes(participant_bloom), bytes(broadcast_bloom),
                        bytes(broadcast_merkle), bytes(param_hash),
                        accounts=self._user(user, instance, account))

    def ix_warmup_witness(self, user, instance, account, index):
        return self._ix("warmup_witness", index, accounts=self._user(user, instance, account))

    def ix_health_check(self, user, instance, account, index, targets):
        return self._ix("health_check", index, list(targets),
                        accounts=self._user(user, instance, account))

    def ix_evidence(self, user, instance, account, index, step, target):
        """An elected verifier of `step`'s round (the current step or the one before) says
        client `target`'s result for it is bad (NotAVerifier, InvalidEvidence,
        AlreadyAccused); evidence_quorum distinct verifiers evict the target."""
        return self._ix("evidence", index, step, target,
                        accounts=self._user(user, instance, account))

    def ix_checkpoint(self, user, instance, account, index, repo, revision, step, param_hash):
        """Records a stored snapshot: its location and the agreed (step, parameter hash) it
        holds; the program refuses any other pair (CheckpointHashMismatch)."""
        return self._ix("checkpoint", index, repo, revision, step, bytes(param_hash),
                        accounts=self._user(user, instance, account))

    def ix_synced(self, user, instance, account, index, step, param_hash):
        """A syncing client's parameters for `step` hash to `param_hash`: the agreed pair, else
        SyncHashMismatch (WrongPhase unless it is Syncing)."""
        return self._ix("synced", index, step, bytes(param_hash),
                        accounts=self._user(user, instance, account))

    def ix_resync(self, user, instance, account, index):
        """An Active or WarmingUp client lags and goes back to syncing."""
        return self._ix("resync", index, accounts=self._user(user, instance, account))

    def ix_withdraw(self, user, instance, account):
        return self._ix("withdraw", accounts=self._user(user, instance, account))

    def ix_free_coordinator(self, authority, instance, account, spill):
        return self._ix("free_coordinator", accounts={
            "authority": authority, "spill": spill, "coordinator_instance": instance,
            "coordinator_account": account})

    def ix_free_run_spec(self, authority, instance, account, spill):
        return self._ix("free_run_spec", accounts={
            "authority": authority, "spill": spill, "coordinator_instance": instance,
            "coordinator_account": account, "run_spec": self.run_spec_key(instance)})

    def ix_authorize_joiner(self, join_authority, instance, grantee):
        return self._ix("authorize_joiner", grantee, accounts={
            "payer": self.payer.pubkey(), "join_authority": join_authority,
            "coordinator_instance": instance,
            "authorization": self.authorization_key(instance, grantee),
            "system_program": SYSTEM_PROGRAM_ID})

    def ix_revoke_joiner(self, join_authority, instance, grantee, spill):
        return self._ix("revoke_joiner", accounts={
            "join_authority": join_authority, "spill": spill, "coordinator_instance": instance,
            "authorization": self.authorization_key(instance, grantee)})

    # ---- sending
    def error_name(self, code: int) -> str:
        if CORE_ERRORS_START <= code < CORE_ERRORS_START + len(CoordinatorError.CODES):
            return CoordinatorError.CODES[code - CORE_ERRORS_START]
        return self._error_names.get(code, f"Custom{code}")

    def _refusal(self, err, ixs=()) -> Exception:
        """A transaction error as what it means: CoordinatorError for the core's refusals (the
        client state machine handles those by name), ProgramError for everything else."""
        if isinstance(err, TransactionErrorInstructionError):
            inner = err.err
            program = ixs[err.index].program_id if err.index < len(ixs) else self.program_id
            # The system program's codes also surface from an Anchor `init` (its CPI).
            if isinstance(inner, InstructionErrorCustom) and (
                    program == SYSTEM_PROGRAM_ID or inner.code in SYSTEM_ERRORS):
                name = SYSTEM_ERRORS.get(inner.code, f"SystemError{inner.code}")
                return ProgramError(name, inner.code, "system program")
            if isinstance(inner, InstructionErrorCustom):
                name = self.error_name(inner.code)
                if name in CoordinatorError.CODES:
                    return CoordinatorError(name, f"program error {inner.code}")
                return ProgramError(name, inner.code)
            return ProgramError(_plain(inner), None)
        return ProgramError(_plain(err), None)

    async def send(self, instructions, signers=(), compute_units: int = None) -> str:
        """Signs (payer first), sends with preflight and waits until it is confirmed. Raises
        CoordinatorError/ProgramError when refused, ChainError when the chain is unreachable."""
        ixs = list(instructions)
        if compute_units:
            ixs.insert(0, set_compute_unit_limit(compute_units))
        try:
            blockhash = (await self.client.get_latest_blockhash()).value.blockhash
            msg = Message.new_with_blockhash(ixs, self.payer.pubkey(), blockhash)
            tx = Transaction([self.payer, *signers], msg, blockhash)
            # the preflight at the blockhash's own commitment: solana-py's default (finalized)
            # refuses a confirmed blockhash on a real validator (BlockhashNotFound)
            resp = await self.client.send_raw_transaction(
                bytes(tx), opts=TxOpts(skip_preflight=False, skip_confirmation=True,
                                       preflight_commitment=Confirmed))
        except RPCException as e:
            info = e.args[0] if e.args else None
            if isinstance(info, SendTransactionPreflightFailureMessage):
                raise self._refusal(info.data.err, ixs) from None
            raise ProgramError(str(info), None) from None
        except Exception as e:  # httpx and solana-py raise many kinds; all mean "unreachable"
            cause = e.__cause__ or e.__context__
            raise ChainError(f"cannot send to {self.rpc_url}: {type(e).__name__}: {e}"
                             + (f" ({type(cause).__name__}: {cause})" if cause else "")) from None
        sig = resp.value
        await self._confirm(sig, ixs)
        return str(sig)

    async def _confirm(self, sig, ixs=()):
        """Polls the status (fast: a local chain answers at once; a cluster within seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONFIRM_TIMEOUT
        delay = 0.02
        while True:
            try:
                status = (await self.client.get_signature_statuses([sig])).value[0]
            except Exception as e:
                raise ChainError(f"cannot confirm {sig}: {e}") from None
            if status is not None and status.err is not None:
                raise self._refusal(status.err, ixs)
            # confirmed, the commitment every read of this client uses: a transaction only
            # processed is not yet visible to them on a real validator (psyche-localnet answers
            # finalized at once)
            if status is not None and status.confirmation_status in _CONFIRMED:
                return
            if loop.time() > deadline:
                raise ChainError(f"transaction {sig} not confirmed within {CONFIRM_TIMEOUT:.0f} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def airdrop(self, to: Pubkey, lamports: int):
        try:
            sig = (await self.client.request_airdrop(to, lamports)).value
        except Exception as e:
            raise ChainError(f"airdrop from {self.rpc_url} failed: {e}") from None
        await self._confirm(sig)

    async def rent_exempt(self, size: int) -> int:
        return (await self.client.get_minimum_balance_for_rent_exemption(size)).value
