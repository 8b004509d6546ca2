"""How training results reach peers, behind one small interface the daemon uses:
`start() -> address`, `set_peers({p2p_id_hex: address})`, `publish(result)`, `close()`, and an
`on_result(TrainingResult)` callback for every result received (not yet verified),
`max_result_bytes` (None, or the run's payload bound, which the daemon sets: iroh drops a result
announced over it before its blob is downloaded; the websocket mesh bounds every message, and
the client's state machine refuses what is over the bound before hashing it), and
`model_sharing`: a ModelSharing (p2p/model_sharing.py) when the transport can share the model
with clients that join a run in progress, else None; `applied_sharing`: an AppliedSharing
(p2p/applied_sharing.py) serving the applied result sets syncing peers replay, else None.

- IrohTransport (default): QUIC via iroh; a result is announced (its signed header) and its
  payload moves as a content-addressed blob fetched from the announcer; shares the model.
- WebSocketTransport: the whole result pushed over a websocket mesh (no native dependency); no
  model sharing.

A transport's problems (a dropped message, a result that could not be fetched) go to this
module's logger as warnings."""

import asyncio
import logging

from ..client.results import TrainingResult
from .mesh import PeerMesh

logger = logging.getLogger(__name__)


class WebSocketTransport:
    model_sharing = None
    applied_sharing = None
    max_result_bytes = None

    def __init__(self, identity, on_result, host="127.0.0.1", port=0):
        self.on_result = on_result
        self.mesh = PeerMesh(identity.public.hex(), self._on_message, host, port)

    async def start(self) -> str:
        return await self.mesh.start()

    def set_peers(self, peers: dict) -> None:
        self.mesh.set_peers(peers)

    async def publish(self, result: TrainingResult) -> None:
        await self.mesh.broadcast(result.to_json())

    def _on_message(self, msg: dict) -> None:
        if msg.get("type") != "result":
            return
        try:
            self.on_result(TrainingResult.from_json(msg))
        except ValueError as e:
            logger.warning(f"dropped a peer message: {e}")

    async def close(self) -> None:
        await self.mesh.close()


class IrohTransport:
    max_result_bytes = None

    def __init__(self, identity, on_result, host="127.0.0.1", port=0, relay_url=None):
        from .applied_sharing import AppliedSharing
        from .iroh_node import IrohNode  # native dependency: only when this transport is used
        from .iroh_results import RESULT_AVAILABLE, fetch_result, publish_result
        from .model_sharing import ModelSharing
        self._fetch, self._publish, self._kind = fetch_result, publish_result, RESULT_AVAILABLE
        self.on_result = on_result
        # the endpoint's id is the client's p2p identity: same ed25519 seed
        self.node = IrohNode(identity.public.hex(), self._on_announcement, host, port,
                             secret_key=identity.seed, relay_url=relay_url)
        self.model_sharing = ModelSharing(self.node)
        self.applied_sharing = AppliedSharing(self.node)
        self._tasks = set()

    async def start(self) -> str:
        return await self.node.start()

    def set_peers(self, peers: dict) -> None:
        self.node.set_peers(peers)

    async def publish(self, result: TrainingResult) -> None:
        await self._publish(self.node, result)

    def _on_announcement(self, msg: dict) -> None:
        if msg.get("type") != self._kind:
            return
        task = asyncio.ensure_future(self._fetch_and_deliver(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fetch_and_deliver(self, msg: dict) -> None:
        try:
            result = await self._fetch(self.node, msg, max_size=self.max_result_bytes)
        except Exception as e:  # unreachable peer, bad blob, forged header: drop, keep going
            logger.warning(f"could not fetch result for step {msg.get('step')}: "
                           f"{type(e).__name__}: {e}")
            return
        self.on_result(result)

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await self.node.close()


def make_transport(kind: str, identity, on_result, host="127.0.0.1", port=0, relay_url=None):
    if kind == "iroh":
        return IrohTransport(identity, on_result, host, port, relay_url=relay_url)
    if kind == "ws":
        return WebSocketTransport(identity, on_result, host, port)
    raise ValueError(f"unknown p2p transport {kind!r}: use iroh or ws")
