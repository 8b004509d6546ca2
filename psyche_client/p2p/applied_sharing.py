"""Applied result sets between peers: every client serves the sets it applied in the last
`kept_rounds` steps (client/applied.py), and a syncing or lagging client asks its peers for the
ones it lacks.

Protocol APPLIED_ALPN, a request/reply protocol of IrohNode:
    request  {"type": "applied", "step": S}            JSON, at most MAX_REQUEST bytes
    reply    {"set": {"step", "trained", "results"}}   or {"set": null}: not held
    request  {"type": "received", "step": S}
    reply    {"results": [...]}: the verified results of step S the peer holds, final or not
The second serves a client that starts taking part in rounds (a synced joiner) and missed
results of the round before its first: as an elected witness it must vouch for them.
The results travel whole (TrainingResult.to_json, payload included): a set is one step's few
results. The asker checks every result's commitment and signature (AppliedSet.from_json); the
state machine then checks the set against the round's witnesses when that round is still in
the coordinator's state, and the replay's final parameter hash otherwise."""

import asyncio
import json
import logging
import random

from psyche_coordinator_core.ops_json import loads as read_json

from ..client.applied import AppliedSet
from ..client.results import TrainingResult
from .errors import BadRequest, P2PError

APPLIED_ALPN = b"psyche/applied/1"
MAX_REQUEST = 128
MAX_REPLY = 256 << 20

logger = logging.getLogger(__name__)


class AppliedSharing:
    """Serves `lookup(step) -> AppliedSet | None` on `node` (register before node.start())."""

    def __init__(self, node, lookup=None, received=None):
        """`received(step) -> [TrainingResult]`: the results of `step` this client holds."""
        self.node = node
        self.lookup = lookup or (lambda step: None)
        self.received = received or (lambda step: [])
        node.serve(APPLIED_ALPN, self._answer, MAX_REQUEST)

    def _answer(self, request: bytes, peer: str) -> bytes:
        try:
            msg = read_json(request)
        except ValueError:
            raise BadRequest("not JSON") from None
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind not in ("applied", "received"):
            raise BadRequest("this protocol answers {'type': 'applied' or 'received', 'step': S}")
        step = msg.get("step")
        if type(step) is not int or step < 0:
            raise BadRequest(f"step must be a non-negative integer, not {step!r}")
        if kind == "received":
            return json.dumps({"results": [r.to_json() for r in self.received(step)]}).encode()
        s = self.lookup(step)
        return json.dumps({"set": s.to_json() if s is not None else None}).encode()

    async def fetch(self, peers, step, **kw):
        return await fetch_applied(self.node, peers, step, **kw)

    async def fetch_received(self, peers, step, **kw):
        return await fetch_received(self.node, peers, step, **kw)


async def request_applied(node, peer, step: int, timeout=None):
    """The peer's applied set for `step` (checked), or None when it does not hold it. Raises
    P2PError when the peer cannot be asked, ValueError when the reply is junk or forged."""
    raw = await node.request(peer, APPLIED_ALPN,
                             json.dumps({"type": "applied", "step": step}).encode(), MAX_REPLY,
                             timeout)
    try:
        reply = read_json(raw)
    except ValueError:
        raise ValueError("reply is not JSON") from None
    if not isinstance(reply, dict) or "set" not in reply:
        raise ValueError("reply has no set field")
    return None if reply["set"] is None else AppliedSet.from_json(reply["set"], step)


async def fetch_applied(node, peers, step: int, exclude=(), attempts=3, retry_delay=0.5,
                        request_timeout=10.0, log=None):
    """(AppliedSet, peer) from the first of `peers` (ids, asked in random order, skipping
    `exclude`) that holds the set for `step`, or (None, None) when none does after `attempts`
    passes (a peer may finalize the round a moment after the asker)."""
    log = log or logger.info
    ids = [p for p in peers if p not in exclude]
    for attempt in range(attempts):
        random.shuffle(ids)
        for peer in ids:
            try:
                got = await request_applied(node, peer, step, request_timeout)
            except (P2PError, ValueError) as e:
                log(f"applied set of step {step}: none from {peer[:8]}: {e}")
                continue
            if got is not None:
                return got, peer
        if attempt + 1 < attempts:
            await asyncio.sleep(retry_delay)
    return None, None


async def fetch_received(node, peers, step: int, request_timeout=10.0, log=None) -> list:
    """Every checked result of `step` that any of `peers` holds (asked at once); the caller
    still checks that each trainer was assigned its batch."""
    log = log or logger.info

    async def one(peer):
        try:
            raw = await node.request(peer, APPLIED_ALPN, json.dumps(
                {"type": "received", "step": step}).encode(), MAX_REPLY, request_timeout)
            got = read_json(raw)["results"]
            results = [TrainingResult.from_json(r) for r in got]
        except (P2PError, ValueError, KeyError, TypeError) as e:
            log(f"results of step {step}: none from {peer[:8]}: {e}")
            return []
        return [r for r in results if r.step == step and not r.check()]
    found = {}
    for results in await asyncio.gather(*(one(p) for p in peers)):
        for r in results:
            found.setdefault(r.commitment, r)
    return list(found.values())
