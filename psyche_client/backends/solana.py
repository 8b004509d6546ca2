"""Backend for a run on Solana: the coordinator account, followed over a PubSub subscription,
is the state; operations are the program's instructions, signed by the client's keypair.

The chain stores each client's p2p identity but not where to reach it. With the run's iroh
relay (`by_key`: the client's --iroh-relay) that identity is enough: it is the peer's endpoint
id, which the transport dials through the relay (docs/across-machines.md). Without one, peers
find each other through a peer directory (`peer_dir`: one `<p2p id hex>.addr` file per client
holding its endpoint ticket), which suits clients sharing a machine or a network file system."""

import asyncio
import logging
from pathlib import Path

import websockets
from solana.rpc.commitment import Confirmed
from solana.rpc.websocket_api import connect
from solders.pubkey import Pubkey
from solders.rpc.responses import AccountNotification

from psyche_coordinator_core import CoordinatorError, LayoutError

from ..chain.keys import identity_of
from ..chain.program import (
    HEAVY_COMPUTE,
    ChainError,
    Coordinator,
    LayoutVersionMismatch,
    ProgramError,
)
from .base import BackendError, FatalBackendError

log = logging.getLogger(__name__)
WS_MAX_MESSAGE = 4 << 20  # a 138 KB account is ~184 KB of base64
# Program errors that no retry can fix: this client may not take part in the run.
# NotADelegate: the contributor identity (--identity) did not list this node key as a delegate.
FATAL = {"NotAuthorized", "SignerMismatch", "AuthorizationMismatch", "WrongCoordinatorAccount",
         "NotADelegate"}


class PeerDirectory:
    """Endpoint tickets of the run's clients, one file each, written atomically."""

    def __init__(self, path):
        self.path = Path(path)

    def publish(self, p2p_id: bytes, addr: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".{p2p_id.hex()}.tmp"
        tmp.write_text(addr)
        tmp.replace(self.path / f"{p2p_id.hex()}.addr")

    def lookup(self, p2p_ids) -> dict:
        found = {}
        for pid in p2p_ids:
            try:
                found[pid.hex()] = (self.path / f"{pid.hex()}.addr").read_text().strip()
            except OSError:
                continue  # not published (yet): that peer is unreachable for now
        return found


class SolanaBackend:
    def __init__(self, rpc_url: str, ws_url: str, run_id: str, keypair, p2p_addr: str = None,
                 peer_dir=None, spec=None, by_key: bool = False, spec_hash: bytes = None):
        self.rpc_url, self.ws_url, self.run_id = rpc_url, ws_url, run_id
        self.keypair = keypair
        self.p2p_identity = identity_of(keypair).public
        self.p2p_addr = p2p_addr
        self.peer_dir = PeerDirectory(peer_dir) if peer_dir else None
        self.by_key = by_key  # peers are their p2p ids, dialled through the run's relay
        self._spec = spec
        # the run spec's hash this client trains (read with the spec); another one in the state
        # means the creator replaced the spec (`set-spec`): this client's model is not the run's
        self.spec_hash = spec_hash
        self.coordinator = Coordinator(rpc_url, keypair)
        self.instance_key = self.coordinator.instance_key(run_id)
        self.account = None
        self.permissionless = True
        self._states = asyncio.Queue(maxsize=1)
        self._latest = None
        self._reader = None
        self._ws = None
        self._closed = False
        self.fatal = None

    async def connect(self) -> None:
        try:
            instance = await self.coordinator.fetch_instance(self.run_id)
        except ChainError as e:
            raise BackendError(str(e)) from None
        if instance is None:
            raise FatalBackendError(f"no run {self.run_id!r} on {self.rpc_url} "
                                    f"(instance {self.instance_key} does not exist)")
        self.account = instance.coordinator_account
        self.permissionless = instance.permissionless
        if self.peer_dir and self.p2p_addr:
            self.peer_dir.publish(self.p2p_identity, self.p2p_addr)
        ws = await self._subscribe()
        log.info("following coordinator account %s over %s (%s run)", self.account, self.ws_url,
                 "permissionless" if self.permissionless else "permissioned")
        await self._refresh()  # the state as of now; notifications follow
        self._reader = asyncio.ensure_future(self._read_loop(ws))

    async def _subscribe(self):
        try:
            ws = await connect(self.ws_url, max_size=WS_MAX_MESSAGE)
            await ws.account_subscribe(self.account, commitment=Confirmed, encoding="base64")
            await asyncio.wait_for(ws.recv(), 10)  # the subscription id
            self._ws = ws
            return ws
        except (OSError, asyncio.TimeoutError, websockets.WebSocketException) as e:
            raise BackendError(f"cannot subscribe at {self.ws_url}: {e}") from None

    async def _refresh(self):
        try:
            self._offer(await self.coordinator.get_account_data(self.account))
        except ChainError as e:
            log.warning("%s", e)

    def _offer(self, data) -> None:
        if data is None:
            self._fail(FatalBackendError("the run's coordinator account was closed"))
            return
        try:
            state = self.coordinator.decode_state(bytes(data))
        except LayoutVersionMismatch as e:  # every later state would be misread as well
            self._fail(FatalBackendError(str(e)))
            return
        except (ChainError, LayoutError) as e:
            log.error("undecodable coordinator account: %s", e)
            return
        if self.spec_hash is not None and state.spec_hash != self.spec_hash:
            self._fail(FatalBackendError(
                f"the run's spec changed to {state.spec_hash.hex()[:16]} (this client trains "
                f"{self.spec_hash.hex()[:16]}): restart it to train the new spec"))
            return
        self._latest = state
        if self._states.full():
            self._states.get_nowait()  # only the newest state matters
        self._states.put_nowait(state)

    def _fail(self, error: BackendError) -> None:
        self.fatal = error
        if self._states.full():
            self._states.get_nowait()
        self._states.put_nowait(None)

    async def _read_loop(self, ws):
        delay = 0.2
        while not self._closed:
            try:
                async for batch in ws:
                    delay = 0.2
                    for msg in batch:
                        if isinstance(msg, AccountNotification):
                            self._offer(msg.result.value.data if msg.result.value else None)
            except (websockets.WebSocketException, OSError) as e:
                log.warning("subscription lost: %s", e)
            if self._closed:
                return
            while not self._closed:  # resubscribe; whatever changed meanwhile is re-read
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                try:
                    ws = await self._subscribe()
                    await self._refresh()
                    break
                except BackendError:
                    continue

    async def spec(self):
        return self._spec

    async def next_state(self):
        state = await self._states.get()
        if state is None:
            raise self.fatal
        return state

    def _instruction(self, op: str, args: dict, authorization=None):
        c, me = self.coordinator, self.keypair.pubkey()
        where = (me, self.instance_key, self.account)
        if op == "tick":
            return c.ix_tick(*where)
        if op == "join":
            return c.ix_join_run(*where, args["p2p_identity"], authorization,
                                 self._identity(args))
        if op == "settle":
            return c.ix_settle_points(*where, args["index"], self._slot_identity(args["index"]))
        if op == "withdraw":
            return c.ix_withdraw(*where)
        if op == "warmup_witness":
            return c.ix_warmup_witness(*where, args["index"])
        if op == "witness":
            return c.ix_witness(*where, args["index"], args["step"], args["participant_bloom"],
                                args["broadcast_bloom"], args["broadcast_merkle"],
                                args["param_hash"])
        if op == "health_check":
            return c.ix_health_check(*where, args["index"], args["targets"])
        if op == "evidence":
            return c.ix_evidence(*where, args["index"], args["step"], args["target"])
        if op == "checkpoint":
            return c.ix_checkpoint(*where, args["index"], args["repo"], args.get("revision", ""),
                                   args["step"], args["param_hash"])
        if op == "synced":
            return c.ix_synced(*where, args["index"], args["step"], args["param_hash"])
        if op == "resync":
            return c.ix_resync(*where, args["index"])
        raise BackendError(f"{op} is not a client operation")

    def _identity(self, args: dict) -> Pubkey:
        """The contributor identity a join acts for: args["identity"], else the signer."""
        identity = args.get("identity")
        return self.keypair.pubkey() if identity is None else Pubkey.from_bytes(bytes(identity))

    def _slot_identity(self, index: int) -> Pubkey:
        """The identity of slot `index` in the latest state: its contributor account is the
        one settle_points credits. (A slot's identity changes only in a new epoch, which waits
        for its settlement.) An index past the slots: this client's own key, for the program
        to refuse by name (InvalidClientIndex)."""
        clients = self._latest.clients if self._latest is not None else []
        if type(index) is int and 0 <= index < len(clients):
            return Pubkey.from_bytes(clients[index].identity)
        return self.keypair.pubkey()

    async def _find_authorization(self, identity: Pubkey):
        """The join authorization of the identity a join acts for, on a permissioned run, if
        it was granted one (it covers the identity's delegates)."""
        if self.permissionless:
            return None
        key = self.coordinator.authorization_key(self.instance_key, identity)
        return key if await self.coordinator.get_account_data(key) is not None else None

    async def send(self, op: str, args: dict) -> None:
        signer = args.get("signer")
        if signer is not None and bytes(signer) != bytes(self.keypair.pubkey()):
            raise BackendError(f"{op}: signer is not this client's keypair")
        try:
            authorization = (await self._find_authorization(self._identity(args))
                             if op == "join" else None)
            await self.coordinator.send([self._instruction(op, args, authorization)],
                                        compute_units=HEAVY_COMPUTE)
        except CoordinatorError:
            raise
        except ProgramError as e:
            if e.name == "AlreadyProcessed":
                return  # the identical transaction landed already (same op in one slot)
            if e.name in FATAL:
                hint = ""
                if e.name == "NotADelegate":
                    hint = (f" (identity {self._identity(args)} does not list this node key "
                            f"{self.keypair.pubkey()}: the identity's owner runs `set-delegates`)")
                self._fail(FatalBackendError(f"{op} refused: {e}{hint}"))
            raise BackendError(f"{op} refused: {e}") from None
        except ChainError as e:
            raise BackendError(str(e)) from None

    def peers(self) -> dict:
        """{p2p id hex: ticket}: from the peer directory when there is one (a ticket carries
        direct addresses too); else, with the relay, every other client of the run by its key
        alone (None: the transport dials the key through the relay)."""
        if self._latest is None or (self.peer_dir is None and not self.by_key):
            return {}
        own = self.p2p_identity
        ids = [c.p2p_identity for c in self._latest.clients if c.p2p_identity != own]
        pending = getattr(self._latest, "pending", [])
        ids += [c.p2p_identity for c in pending if c.p2p_identity != own]
        if self.peer_dir is not None:
            return self.peer_dir.lookup(ids)
        return {i.hex(): None for i in ids}

    async def close(self) -> None:
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            try:
                await self._ws.close()
            except (OSError, websockets.WebSocketException):
                pass  # already gone
        await self.coordinator.close()
