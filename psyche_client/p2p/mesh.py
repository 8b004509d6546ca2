"""A small peer-to-peer mesh over websockets: every client listens, and pushes each message it
publishes straight to every peer it knows. Messages are self-authenticating (signed training
results), so the transport carries no identity of its own."""

import asyncio
import json
import logging

import websockets
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

from psyche_coordinator_core.ops_json import loads as read_json

MAX_PEER_MESSAGE = 8 << 20
logger = logging.getLogger(__name__)


class PeerMesh:
    def __init__(self, own_id_hex: str, on_message, host="127.0.0.1", port=0):
        self.own = own_id_hex
        self.on_message = on_message  # called with each decoded dict
        self.host, self.port = host, port
        self.peers = {}  # p2p id hex -> addr
        self._out = {}  # p2p id hex -> open client connection
        self._server = None

    async def start(self) -> str:
        self._server = await serve(self._serve, self.host, self.port, max_size=MAX_PEER_MESSAGE)
        self.port = self._server.sockets[0].getsockname()[1]
        return f"ws://{self.host}:{self.port}"

    async def close(self):
        for ws in list(self._out.values()):
            await ws.close()
        if self._server is not None:
            self._server.close()

    async def _serve(self, ws):
        try:
            async for raw in ws:
                try:
                    msg = read_json(raw)
                except ValueError:
                    continue  # a malformed message from a peer is dropped
                if isinstance(msg, dict):
                    self.on_message(msg)
        except websockets.ConnectionClosed:
            pass

    def set_peers(self, peers: dict) -> None:
        self.peers = {k: v for k, v in peers.items() if k != self.own and v}
        for k in list(self._out):
            if k not in self.peers:
                asyncio.ensure_future(self._out.pop(k).close())

    async def _send_to(self, peer: str, data: str) -> bool:
        for _ in range(2):  # a stale connection gets one reconnect
            ws = self._out.get(peer)
            try:
                if ws is None:
                    ws = await asyncio.wait_for(
                        connect(self.peers[peer], max_size=MAX_PEER_MESSAGE), 5)
                    self._out[peer] = ws
                await ws.send(data)
                return True
            except (OSError, asyncio.TimeoutError, websockets.WebSocketException, KeyError):
                self._out.pop(peer, None)
        return False

    async def broadcast(self, msg: dict) -> int:
        """Send to every known peer; returns how many took it."""
        data = json.dumps(msg)
        sent = await asyncio.gather(*(self._send_to(p, data) for p in list(self.peers)))
        return sum(sent)
