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
  payload moves as a content-addressed blob fetched from an announcer; every node forwards the
  results it checked (p2p/forwarding.py), so a result reaches peers its trainer cannot reach;
  shares the model.
- WebSocketTransport: the whole result pushed over a websocket mesh (no native dependency); no
  model sharing.

A transport's problems (a dropped message, a result that could not be fetched) go to this
module's logger as warnings."""

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

    def __init__(self, identity, on_result, host="127.0.0.1", port=0, relay_url=None,
                 stun=(), known_addrs=None):
        from .applied_sharing import AppliedSharing
        from .forwarding import ResultForwarding
        from .iroh_node import IrohNode  # native dependency: only when this transport is used
        from .iroh_results import RESULT_AVAILABLE, fetch_result, result_announcement
        from .model_sharing import ModelSharing
        self._fetch, self._kind = fetch_result, RESULT_AVAILABLE
        self.on_result = on_result
        # the endpoint's id is the client's p2p identity: same ed25519 seed
        self.node = IrohNode(identity.public.hex(), self._on_announcement, host, port,
                             secret_key=identity.seed, relay_url=relay_url, stun=stun,
                             known_addrs=known_addrs)
        self.forwarding = ResultForwarding(self.node, self._fetch_announced, self._deliver,
                                           result_announcement)
        self.model_sharing = ModelSharing(self.node)
        self.applied_sharing = AppliedSharing(self.node)
        # p2p id hex -> "direct" or "relay": the path to each peer when this client last
        # announced a result to it (logged at exit: which peers hole punching reached)
        self.last_paths = {}

    async def start(self) -> str:
        return await self.node.start()

    def set_peers(self, peers: dict) -> None:
        self.node.set_peers(peers)

    async def publish(self, result: TrainingResult) -> None:
        await self.forwarding.publish(result)
        for peer in self.node.peers:  # the path to each peer as of this result's announcement
            kind = self.node.path_kind(peer)
            if kind is not None:
                self.last_paths[peer] = kind

    def _on_announcement(self, msg: dict) -> None:
        if msg.get("type") == self._kind:
            self.forwarding.on_announcement(msg)

    async def _fetch_announced(self, msg: dict) -> TrainingResult:
        return await self._fetch(self.node, msg, max_size=self.max_result_bytes)

    def _deliver(self, result: TrainingResult) -> None:
        self.on_result(result)

    async def close(self) -> None:
        if self.last_paths:
            logger.info("p2p paths: %s; results forwarded for others: %d",
                        ", ".join(f"{p[:8]}={k}" for p, k in sorted(self.last_paths.items())),
                        self.forwarding.forwarded)
        await self.forwarding.close()
        await self.node.close()


def make_transport(kind: str, identity, on_result, host="127.0.0.1", port=0, relay_url=None,
                   stun=(), known_addrs=None):
    if kind == "iroh":
        return IrohTransport(identity, on_result, host, port, relay_url=relay_url, stun=stun,
                             known_addrs=known_addrs)
    if kind == "ws":
        return WebSocketTransport(identity, on_result, host, port)
    raise ValueError(f"unknown p2p transport {kind!r}: use iroh or ws")
