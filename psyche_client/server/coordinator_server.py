"""The centralized backend: owns the coordinator core, ticks it when a phase is due (and on a
timer), applies clients' operations, persists every accepted change, and broadcasts each new
state. It also keeps the run's points ledger {identity: Points}: a `settle` credits the slot's
points to its identity's entry in the same commit that zeroes the slot (docs/points.md)."""

import asyncio
import json
import logging
import os
import time

import websockets
from websockets.asyncio.server import serve

from psyche_coordinator_core import (
    ClientState,
    CoordinatorError,
    RunState,
    apply,
    credit,
    pending_credit,
    tick_deadline,
    to_bytes,
    with_unsettled,
)
from psyche_coordinator_core.ops_json import ARGS, decode_args, loads

from ..delegation import Delegation, DelegationError
from ..identity import verify
from ..ledger import ledger_to_json
from ..protocol import (
    CLOSE_BAD_HELLO,
    CLOSE_TOO_MANY_ERRORS,
    CLOSE_WRONG_RUN,
    MAX_ERRORS_PER_CONNECTION,
    MAX_MESSAGE_BYTES,
    hello_message,
)
from .transitions import describe_changes

log = logging.getLogger(__name__)

CLIENT_OPS = {"join", "withdraw", "warmup_witness", "witness", "health_check", "checkpoint", "tick",
              "synced", "resync", "settle", "evidence"}
QUERIES = {"leaderboard"}
HELLO_TIMEOUT = 10


class ServerRefusal(Exception):
    """An operation the server refuses before the core sees it, with a server-side code (the
    core's codes are fixed): NotADelegate, NotAllowed, UnknownQuery."""

    def __init__(self, code: str, detail: str = ""):
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


class Connection:
    def __init__(self, ws, signer=None, p2p_identity=None, p2p_addr=None, delegation=None):
        self.ws, self.signer, self.p2p_identity, self.p2p_addr = ws, signer, p2p_identity, p2p_addr
        self.delegation = delegation  # a checked Delegation: the signer may join as its identity
        self.errors = 0
        self.replaced = False

    def may_act_for(self, identity: bytes) -> bool:
        return identity == self.signer or (self.delegation is not None
                                           and self.delegation.identity == identity)

    def identities(self) -> list:
        """The keys this connection may act as: its signer, and its delegation's identity."""
        return [self.signer] + ([self.delegation.identity] if self.delegation else [])


class CoordinatorServer:
    def __init__(self, state, store=None, withdraw_on_disconnect=True, tick_interval=0.5,
                 clock=time.time, spec=None, reconnect_grace=None, ledger=None, allow=None):
        """`reconnect_grace`: seconds the members of a state restored after a restart have to
        connect again before they are withdrawn (None: a fresh state, nobody to wait for).
        `ledger`: the points ledger {identity: Points} saved with the state (None: empty).
        `allow`: an AllowList (allowlist.py) of the identities that may take part, or None:
        permissionless, anyone may join."""
        self.allow = allow
        self.reconnect_grace = reconnect_grace
        self.spec = spec  # training spec for clients (a dict), None: simulated training
        self.state = state
        self.state_bytes = to_bytes(state)
        self.ledger = dict(ledger or {})
        self.store = store
        self.withdraw_on_disconnect = withdraw_on_disconnect
        self.tick_interval = tick_interval
        self.clock = clock
        self.connections = {}  # ws -> Connection (observers have signer None)
        self.finished = asyncio.Event()
        self._changed = asyncio.Event()  # wakes the tick loop: the deadline may have moved

    # ---------------------------------------------------------------- state changes
    def now(self) -> int:
        return int(self.clock())

    def _commit(self, new_state, ledger=None) -> bool:
        """Persist, then publish. `ledger`: the new points ledger (None: unchanged), saved with
        the state in one atomic write. Returns whether anything changed."""
        new_bytes = to_bytes(new_state)
        if new_bytes == self.state_bytes and ledger is None:
            return False
        if self.store is not None:  # durable before anyone is told
            self.store.save(new_state, self.ledger if ledger is None else ledger)
        if ledger is not None:
            self.ledger = ledger
        old, self.state, self.state_bytes = self.state, new_state, new_bytes
        for line in describe_changes(old, new_state):
            log.info("%s", line)
        if new_state.run_state == RunState.Finished:
            self.finished.set()
        self._changed.set()
        self._broadcast(new_bytes)
        return True

    def apply_op(self, op: str, args: dict):
        """Apply an operation then tick (so a join can start an epoch at once), and commit."""
        now = self.now()
        ledger = None
        if op == "settle":  # read what the slot holds before the settle zeroes it
            c = pending_credit(self.state, args["index"])
        nxt = apply(self.state, now, op, **args)
        if op == "settle":  # credited at the rates it was earned under, in the same commit
            ledger = dict(self.ledger)
            ledger[c.identity] = credit(ledger.get(c.identity), c, self.state.config)
            log.info("settled client %d: %d rounds present, %d sequences to %s", args["index"],
                     c.presence, c.sequences, c.identity.hex()[:8])
        try:
            nxt = apply(nxt, now, "tick")
        except CoordinatorError:
            pass  # halted: the operation itself still stands
        self._commit(nxt, ledger)

    def leaderboard(self) -> dict:
        """The answer to a leaderboard query: the ledger as settled, and as it will be once
        every slot is settled (what the slots hold now added: live during an epoch)."""
        return {"settled": ledger_to_json(self.ledger),
                "ledger": ledger_to_json(with_unsettled(self.ledger, self.state)),
                "epoch": self.state.epoch, "step": self.state.step,
                "run_state": self.state.run_state.name}

    def authority(self, op: str) -> None:
        """The run authority's pause or resume: the operator signals the server process."""
        try:
            self.apply_op(op, {})
        except CoordinatorError as e:
            log.warning("%s refused: %s", op, e)
            return
        log.info("the operator asked to %s the run: %s", op, self.state.run_state.name
                 + (" (pause pending: the round ends, then Cooldown)" if self.state.pending_pause
                    else ""))

    def tick(self) -> bool:
        """Tick the core; returns whether the state changed."""
        try:
            return self._commit(apply(self.state, self.now(), "tick"))
        except CoordinatorError:
            return False  # halted runs do not tick

    def next_wait(self, changed: bool) -> float:
        """Seconds until the next tick: at the phase's deadline if it comes before the regular
        interval (a round then waits no longer than the core requires), else the interval."""
        due = tick_deadline(self.state)
        if due is None:
            return self.tick_interval
        wait = due - self.clock()
        if wait <= 0 and not changed:
            return self.tick_interval  # due yet nothing moved: do not spin
        # the core counts whole seconds: tick just after the second turns
        return min(self.tick_interval, max(0.0, wait) + 0.002)

    def _broadcast(self, payload) -> None:
        for conn in list(self.connections.values()):
            asyncio.ensure_future(self._send(conn.ws, payload))

    async def _send(self, ws, payload) -> None:
        try:
            await ws.send(payload)
        except websockets.ConnectionClosed:
            pass

    def is_epoch_client(self, signer: bytes) -> bool:
        """Whether `signer` is a healthy client of this epoch (who the data server serves)."""
        i = self.state.client_index(signer)
        return i is not None and self.state.clients[i].state == ClientState.Healthy

    def _peers_message(self) -> str:
        peers = {c.p2p_identity.hex(): c.p2p_addr for c in self.connections.values()
                 if c.signer is not None and c.p2p_addr}
        return json.dumps({"type": "peers", "peers": peers})

    # ---------------------------------------------------------------- connections
    async def _error(self, conn_or_ws, code, message, op_id=None):
        ws = getattr(conn_or_ws, "ws", conn_or_ws)
        await self._send(ws, json.dumps({"type": "error", "id": op_id, "code": code,
                                         "message": message}))

    async def _hello(self, ws):
        nonce = os.urandom(32)
        await ws.send(json.dumps({"type": "challenge", "nonce": nonce.hex()}))
        try:
            raw = await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT)
            msg = loads(raw)  # as the Rust core reads JSON; MalformedJson is a ValueError
            if not isinstance(msg, dict) or msg.get("type") != "hello":
                raise ValueError("the first message must be a hello")
        except asyncio.TimeoutError:
            await self._error(ws, "BadHello", f"no hello within {HELLO_TIMEOUT} s")
            await ws.close(CLOSE_BAD_HELLO, "no hello")
            return None
        except (ValueError, TypeError) as e:
            await self._error(ws, "Malformed", f"bad hello: {e}")
            await ws.close(CLOSE_BAD_HELLO, "bad hello")
            return None
        if msg.get("run_id") != self.state.run_id:
            await self._error(ws, "WrongRunId",
                              f"this server coordinates run {self.state.run_id!r}, "
                              f"not {msg.get('run_id')!r}")
            await ws.close(CLOSE_WRONG_RUN, "wrong run id")
            return None
        if msg.get("observer") is True:
            return Connection(ws)
        try:
            signer = bytes.fromhex(msg["signer"])
            p2p = bytes.fromhex(msg["p2p_identity"])
            signature = bytes.fromhex(msg["signature"])
            addr = msg.get("p2p_addr")
            if len(signer) != 32 or len(p2p) != 32 or not (addr is None or isinstance(addr, str)):
                raise ValueError
        except (KeyError, ValueError, TypeError):
            await self._error(ws, "BadHello", "hello needs signer, p2p_identity (32-byte hex), "
                              "signature (hex) and p2p_addr (string or null)")
            await ws.close(CLOSE_BAD_HELLO, "bad hello")
            return None
        if not verify(signer, hello_message(nonce, self.state.run_id), signature):
            await self._error(ws, "BadHello", "signature does not match signer")
            await ws.close(CLOSE_BAD_HELLO, "bad signature")
            return None
        delegation = None
        if msg.get("delegation") is not None:
            try:
                delegation = Delegation.from_json(msg["delegation"])
                why = delegation.problem(self.state.run_id, signer)
            except DelegationError as e:
                why = str(e)
            if why:
                await self._error(ws, "BadDelegation", why)
                await ws.close(CLOSE_BAD_HELLO, "bad delegation")
                return None
            log.info("%s acts for identity %s (delegation checked)", signer.hex()[:8],
                     delegation.identity.hex()[:8])
        return Connection(ws, signer, p2p, addr, delegation)

    async def handle(self, ws):
        conn = await self._hello(ws)
        if conn is None:
            return
        if conn.signer is not None:
            for other in list(self.connections.values()):
                if other.signer == conn.signer:  # a restarted client: the new socket wins
                    other.replaced = True
                    await other.ws.close(1000, "replaced by a newer connection")
        self.connections[ws] = conn
        try:
            await ws.send(json.dumps({"type": "spec", "spec": self.spec}))
            await ws.send(self.state_bytes)
            if conn.signer is not None:
                self._broadcast(self._peers_message())
            else:
                await ws.send(self._peers_message())
            async for raw in ws:
                await self._on_message(conn, raw)
                if conn.errors > MAX_ERRORS_PER_CONNECTION:
                    await ws.close(CLOSE_TOO_MANY_ERRORS, "too many bad messages")
                    break
        except websockets.ConnectionClosed:
            pass
        finally:
            self.connections.pop(ws, None)
            if conn.signer is not None:
                self._broadcast(self._peers_message())
                if self.withdraw_on_disconnect and not conn.replaced:
                    try:
                        self.apply_op("withdraw", {"signer": conn.signer})
                    except CoordinatorError:
                        pass  # not in the run: nothing to withdraw

    async def _on_message(self, conn, raw) -> None:
        op_id = None
        try:
            if isinstance(raw, bytes):
                raise ValueError("binary frames are not accepted from clients")
            msg = loads(raw)  # as the Rust core reads JSON; MalformedJson is a ValueError
            if not isinstance(msg, dict):
                raise ValueError("a message is a JSON object")
            op_id = msg.get("id")
            if msg.get("type") == "query" and isinstance(msg.get("query"), str):
                await self._query(conn, msg["query"], op_id)
                return
            if msg.get("type") != "op" or not isinstance(msg.get("op"), str):
                raise ValueError('expected {"type": "op", "id": int, "op": str, "args": {...}}')
        except ValueError as e:  # ops_json.MalformedJson is a ValueError
            conn.errors += 1
            await self._error(conn, "Malformed", str(e), op_id if isinstance(op_id, int) else None)
            return
        op, args = msg["op"], msg.get("args", {})
        try:
            if conn.signer is None:
                raise CoordinatorError("NotAClient", "observers cannot send operations")
            if self.allow is not None and not any(k in self.allow for k in conn.identities()):
                raise ServerRefusal("NotAllowed", f"{conn.signer.hex()[:16]} is not on this "
                                    f"run's allow-list (run {self.state.run_id!r}), nor does it "
                                    "present a delegation of an identity that is")
            if op not in CLIENT_OPS:
                raise CoordinatorError("InvalidOperation",
                                       f"{op!r} is for the run authority, not clients")
            typed = decode_args(op, args)
            if "signer" in ARGS[op] and typed.get("signer") != conn.signer:
                raise CoordinatorError("NotAClient", "args.signer must be this connection's signer")
            identity = typed.get("identity")
            if op == "join" and identity is not None and not conn.may_act_for(identity):
                raise ServerRefusal("NotADelegate", f"{conn.signer.hex()[:16]} presented no "
                                    f"delegation of identity {identity.hex()[:16]} for run "
                                    f"{self.state.run_id!r} (psyche-centralized-client "
                                    "delegate; train --delegation)")
            if op == "join" and self.allow is not None:
                joins_as = conn.signer if identity is None else identity
                if joins_as not in self.allow:
                    raise ServerRefusal("NotAllowed", f"identity {joins_as.hex()[:16]} is not "
                                        f"on this run's allow-list (run {self.state.run_id!r})")
            self.apply_op(op, typed)
        except (CoordinatorError, ServerRefusal) as e:
            conn.errors += 1
            await self._error(conn, e.code, e.detail, op_id)  # the client names the code itself
            return
        await self._send(conn.ws, json.dumps({"type": "ok", "id": op_id}))

    async def _query(self, conn, query, op_id) -> None:
        """A read-only question, observers included: {"type": "query", "id": int,
        "query": "leaderboard"} -> {"type": "result", "id": int, "result": {...}}."""
        if query not in QUERIES:
            conn.errors += 1
            await self._error(conn, "UnknownQuery", f"unknown query {query!r}; known: "
                              + ", ".join(sorted(QUERIES)), op_id)
            return
        await self._send(conn.ws, json.dumps({"type": "result", "id": op_id,
                                              "result": self.leaderboard()}))

    async def _withdraw_absent(self) -> None:
        """A restored state lists the clients and joiners of the process that died; their
        connections died with it. Those that have not connected again within the grace period
        are gone (killed with it, say): withdraw them as a dropped connection would be, so an
        epoch does not go on with them, nor takes their model for one that peers still hold
        (their leaving lets the next epoch fall back to the recorded snapshot)."""
        await asyncio.sleep(self.reconnect_grace)
        connected = {c.signer for c in self.connections.values() if c.signer is not None}
        st = self.state
        members = [c.signer for c in st.pending]
        members += [c.signer for c in st.clients if c.state == ClientState.Healthy]
        for signer in dict.fromkeys(members):
            if signer in connected:
                continue
            try:
                self.apply_op("withdraw", {"signer": signer})
            except CoordinatorError:
                continue  # halted, or no longer a member
            log.info("withdrew %s: not connected again %s s after the restart",
                     signer.hex()[:8], self.reconnect_grace)

    # ---------------------------------------------------------------- main loop
    async def _tick_loop(self):
        while True:
            changed = self.tick()
            self._changed.clear()  # this tick's own change needs no wake-up
            try:
                await asyncio.wait_for(self._changed.wait(), self.next_wait(changed))
            except asyncio.TimeoutError:
                pass

    async def run(self, host="127.0.0.1", port=0, started=None):
        async with serve(self.handle, host, port, max_size=MAX_MESSAGE_BYTES,
                         ping_interval=5, ping_timeout=10) as server:
            bound = server.sockets[0].getsockname()[1]
            if self.store is not None:
                self.store.save(self.state, self.ledger)
            st = self.state
            log.info("server: run %r listening on ws://%s:%d (%s, epoch %d, step %d, %d clients)",
                     st.run_id, host, bound, st.run_state.name, st.epoch, st.step,
                     len(st.clients))
            if started is not None:
                started(bound)
            absent = None
            if self.reconnect_grace is not None and self.withdraw_on_disconnect:
                absent = asyncio.ensure_future(self._withdraw_absent())
            try:
                await self._tick_loop()
            finally:
                if absent is not None:
                    absent.cancel()
