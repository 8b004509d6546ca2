"""Backend for the centralized server: one websocket, reconnecting until told to stop."""

import asyncio
import itertools
import json
import logging

import websockets
from websockets.asyncio.client import connect

from psyche_coordinator_core import CoordinatorError, LayoutError, from_bytes
from psyche_coordinator_core.ops_json import encode_args, loads

from ..protocol import CLOSE_WRONG_RUN, MAX_MESSAGE_BYTES, hello_message
from .base import BackendError, FatalBackendError

log = logging.getLogger(__name__)
OP_TIMEOUT = 15


class CentralizedBackend:
    def __init__(self, url: str, run_id: str, identity=None, p2p_identity: bytes = None,
                 p2p_addr: str = None, observer: bool = False, reconnect: bool = True,
                 delegation=None):
        """`delegation`: a Delegation (psyche_client/delegation.py) presented in the hello, so
        that this node key may join as the contributor identity that signed it."""
        self.url, self.run_id, self.identity = url, run_id, identity
        self.delegation = delegation
        self.p2p_identity, self.p2p_addr, self.observer = p2p_identity, p2p_addr, observer
        self.reconnect = reconnect
        self._ws = None
        self._states = asyncio.Queue(maxsize=1)
        self._peers = {}
        self._pending = {}
        self._ids = itertools.count(1)
        self._reader = None
        self._connected = asyncio.Event()
        self._spec = asyncio.get_event_loop().create_future()
        self._closed = False
        self.fatal = None

    def peers(self) -> dict:
        return dict(self._peers)

    async def _handshake(self):
        ws = await connect(self.url, max_size=MAX_MESSAGE_BYTES, open_timeout=5)
        challenge = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if challenge.get("type") != "challenge":
            raise BackendError(f"unexpected first message from server: {challenge}")
        if self.observer:
            hello = {"type": "hello", "run_id": self.run_id, "observer": True}
        else:
            nonce = bytes.fromhex(challenge["nonce"])
            hello = {"type": "hello", "run_id": self.run_id, "signer": self.identity.public.hex(),
                     "p2p_identity": self.p2p_identity.hex(), "p2p_addr": self.p2p_addr,
                     "signature": self.identity.sign(hello_message(nonce, self.run_id)).hex()}
            if self.delegation is not None:
                hello["delegation"] = self.delegation.to_json()
        await ws.send(json.dumps(hello))
        return ws

    async def connect(self) -> None:
        try:
            self._ws = await self._handshake()
        except (OSError, asyncio.TimeoutError, websockets.WebSocketException, ValueError) as e:
            raise BackendError(f"cannot reach coordinator at {self.url}: {e}") from None
        self._connected.set()
        self._reader = asyncio.ensure_future(self._read_loop())

    async def _read_loop(self):
        delay = 0.2
        while not self._closed:
            try:
                async for msg in self._ws:
                    delay = 0.2
                    self._dispatch(msg)
                code = self._ws.close_code
            except websockets.ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd else None
            self._connected.clear()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(BackendError("connection to the coordinator lost"))
            self._pending.clear()
            if code == CLOSE_WRONG_RUN or self.fatal:
                self.fatal = self.fatal or FatalBackendError("server rejected the run id")
                self._wake_fatal()
                return
            if self._closed or not self.reconnect:
                self.fatal = BackendError("connection to the coordinator closed")
                self._wake_fatal()
                return
            while not self._closed:  # reconnect with backoff: the server may be restarting
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                try:
                    self._ws = await self._handshake()
                    log.info("reconnected to %s", self.url)
                    self._connected.set()
                    break
                except (OSError, asyncio.TimeoutError, websockets.WebSocketException,
                        ValueError, BackendError):
                    continue

    def _wake_fatal(self):
        if self._states.empty():
            self._states.put_nowait(None)

    def _dispatch(self, msg):
        if isinstance(msg, bytes):
            try:
                state = from_bytes(msg)
            except LayoutError as e:
                log.error("server sent an undecodable state: %s", e)
                return
            if self._states.full():
                self._states.get_nowait()  # only the newest state matters
            self._states.put_nowait(state)
            return
        try:
            data = loads(msg)
        except ValueError as e:
            log.warning("server sent an unreadable message: %s", e)
            return
        if not isinstance(data, dict):
            log.warning("server sent a message that is not an object: %.80r", msg)
            return
        kind = data.get("type")
        if kind == "peers":
            if isinstance(data.get("peers"), dict):
                self._peers = data["peers"]
        elif kind == "spec":
            if not self._spec.done():
                self._spec.set_result(data.get("spec"))
        elif kind in ("ok", "error", "result"):
            fut = self._pending.pop(data.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(data)
            elif kind == "error":
                if data.get("code") in ("WrongRunId", "BadHello", "BadDelegation"):
                    self.fatal = FatalBackendError(f"{data['code']}: {data.get('message')}")
                log.warning("server error: %s: %s", data.get("code"), data.get("message"))

    async def spec(self, timeout: float = 30):
        """The run's training spec (a dict), or None for simulated training."""
        try:
            return await asyncio.wait_for(asyncio.shield(self._spec), timeout)
        except asyncio.TimeoutError:
            raise BackendError("the server sent no training spec") from None

    async def next_state(self):
        state = await self._states.get()
        if state is None:
            raise self.fatal
        return state

    async def _request(self, message: dict, what: str) -> dict:
        """Send a message that carries a fresh id and wait for the reply with that id."""
        if not self._connected.is_set():
            raise BackendError("not connected to the coordinator")
        op_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[op_id] = fut
        try:
            await self._ws.send(json.dumps({**message, "id": op_id}))
            return await asyncio.wait_for(fut, OP_TIMEOUT)
        except (websockets.ConnectionClosed, asyncio.TimeoutError) as e:
            raise BackendError(f"{what} not acknowledged: {e!r}") from None
        finally:
            self._pending.pop(op_id, None)

    async def send(self, op: str, args: dict) -> None:
        reply = await self._request({"type": "op", "op": op, "args": encode_args(op, args)}, op)
        if reply["type"] == "error":
            code = reply.get("code")
            if code in CoordinatorError.CODES:
                raise CoordinatorError(code, reply.get("message", ""))
            if code == "NotAllowed":  # the server's allow-list: asking again cannot help
                raise FatalBackendError(f"{code}: {reply.get('message')}")
            raise BackendError(f"{code}: {reply.get('message')}")

    async def query(self, what: str = "leaderboard") -> dict:
        """A read-only query's result (observers too): "leaderboard" (protocol.py)."""
        reply = await self._request({"type": "query", "query": what}, f"query {what}")
        if reply["type"] == "error":
            raise BackendError(f"{reply.get('code')}: {reply.get('message')}")
        return reply["result"]

    async def close(self) -> None:
        self._closed = True
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
