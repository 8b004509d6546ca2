"""P2P model sharing: a client that joins after the run's first epoch gets the current
parameters from the epoch's other clients instead of the run seed.

Serving. Once a client has applied every round of an epoch (Cooldown), it offers a snapshot of
its parameters (training/snapshot.py) as a blob of its IrohNode, described by a ModelManifest:
the step the next epoch starts training at, the parameter hash (training.model.parameter_hash),
the blob's SHA-256 and size, and the model's layout digest and parameter count, by which a
joiner checks the shape before fetching. Only the latest snapshot is kept.

Protocol MODEL_ALPN, a request/reply protocol of IrohNode (see its `serve`):
    request  {"type": "manifest"}                     JSON, at most MAX_REQUEST bytes
    reply    {"manifest": {...}} or {"manifest": null}  JSON, at most MAX_REPLY bytes
Anything else is refused with a reason (RequestError on the asking side). The snapshot itself
moves over the node's blob protocol, checked against its SHA-256 on arrival.

Joining (fetch_model). One peer could serve anything, so the joiner asks all the epoch's other
clients and keeps only manifests for the step it is joining at and its own model layout. Each
of those is a vote; the manifest with more than half of the votes wins, the others are logged as
outvoted (peers without a snapshot, e.g. other joiners, do not vote). The blob is fetched from
the peers that offered the winner, one after another until one delivers bytes that hash right;
the caller then loads it and checks the parameter hash against the manifest. No majority, no
holder that delivers, or no answer at all: ask again after a pause, until the time is up."""

import asyncio
import json
import logging
import random
import time
from dataclasses import asdict, dataclass

from psyche_coordinator_core.ops_json import loads as read_json

from .errors import BadRequest, ModelSharingError, P2PError

MODEL_ALPN = b"psyche/model/1"
MAX_REQUEST = 256
MAX_REPLY = 4096
MIN_RATE = 5e6  # bytes/s a snapshot transfer may not fall below before it times out

logger = logging.getLogger(__name__)


def _is_hash(v) -> bool:
    return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)


def _is_count(v) -> bool:
    return type(v) is int and 0 <= v < 1 << 63


@dataclass(frozen=True)
class ModelManifest:
    step: int  # the step the next epoch trains first: these parameters are its starting point
    params: str  # parameter_hash of the model after loading the blob
    blob: str  # SHA-256 (hex) of the safetensors bytes
    size: int  # bytes of the blob
    layout: str  # training.snapshot.layout_of digest: names, dtypes and shapes
    parameters: int  # parameter count, for the logs

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d) -> "ModelManifest":
        """Raises ValueError on anything malformed."""
        if not isinstance(d, dict) or set(d) != set(cls.__dataclass_fields__):
            raise ValueError("malformed model manifest")
        if not (all(_is_hash(d[k]) for k in ("params", "blob", "layout"))
                and all(_is_count(d[k]) for k in ("step", "size", "parameters"))):
            raise ValueError("malformed model manifest")
        return cls(**d)


class ModelSharing:
    """Serves this client's latest snapshot on `node` (register before node.start())."""

    def __init__(self, node):
        self.node = node
        self.manifest = None
        node.serve(MODEL_ALPN, self._answer, MAX_REQUEST)

    def offer(self, data: bytes, step: int, params: str, layout: str,
              parameters: int) -> ModelManifest:
        """Serve `data` as the snapshot for `step`, dropping the previous one."""
        blob = self.node.add(data)  # in the store before any peer can read the manifest
        old = self.manifest
        self.manifest = ModelManifest(step, params, blob, len(data), layout, parameters)
        if old is not None and old.blob != blob:
            self.node.store.remove(old.blob)
        return self.manifest

    def _answer(self, request: bytes, peer: str) -> bytes:
        try:
            msg = read_json(request)
        except ValueError:
            raise BadRequest("not JSON") from None
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind != "manifest":
            raise BadRequest(f"unknown request {kind!r}; this protocol answers 'manifest'")
        m = self.manifest
        return json.dumps({"manifest": m.to_json() if m else None}).encode()

    async def fetch(self, peers, step, layout, max_size, **kw):
        return await fetch_model(self.node, peers, step, layout, max_size, **kw)


async def request_manifest(node, peer, timeout=None):
    """The peer's ModelManifest, or None when it has no snapshot. Raises RequestError (or
    P2PError for an unknown peer) when it cannot be had, ValueError when the reply is junk."""
    raw = await node.request(peer, MODEL_ALPN, b'{"type":"manifest"}', MAX_REPLY, timeout)
    try:
        reply = read_json(raw)
    except ValueError:
        raise ValueError("reply is not JSON") from None
    if not isinstance(reply, dict) or "manifest" not in reply:
        raise ValueError("reply has no manifest field")
    return None if reply["manifest"] is None else ModelManifest.from_json(reply["manifest"])


def choose_majority(answers: dict, step: int, layout: str):
    """(winner or None, its peers, lines for the log) from {peer: manifest or None}.

    Votes are the manifests for `step` and `layout`; the winner needs more than half of them."""
    votes, notes = {}, []
    for peer, m in answers.items():
        if m is None:
            continue
        if m.step != step:
            notes.append(f"peer {peer[:8]} has the snapshot for step {m.step}, not {step}")
        elif m.layout != layout:
            notes.append(f"peer {peer[:8]} has a model of another shape ({m.parameters:,} "
                         "parameters)")
        else:
            votes.setdefault(m, []).append(peer)
    if not votes:
        return None, [], notes
    best = max(votes, key=lambda m: len(votes[m]))
    total = sum(len(v) for v in votes.values())
    if 2 * len(votes[best]) <= total:
        notes.append(f"no majority among {total} snapshots for step {step}: "
                     + ", ".join(f"{len(v)} for params {m.params[:16]}" for m, v in votes.items()))
        return None, [], notes
    for m, v in votes.items():
        if m is not best:
            notes.append(f"outvoted: {', '.join(p[:8] for p in v)} offered params "
                         f"{m.params[:16]} (blob {m.blob[:16]}), {len(votes[best])} of {total} "
                         f"offered {best.params[:16]}")
    return best, list(votes[best]), notes


async def _ask_all(node, peers, timeout, log) -> dict:
    async def one(peer):
        try:
            return await request_manifest(node, peer, timeout)
        except (P2PError, ValueError) as e:
            log(f"model: no manifest from {peer[:8]}: {e}")
            return None
    got = await asyncio.gather(*(one(p) for p in peers))
    return dict(zip(peers, got))


async def _fetch_from(node, manifest, holders, deadline, log):
    """The verified blob from the first holder that delivers it, or None."""
    holders = list(holders)
    random.shuffle(holders)  # spread joiners over the holders
    for peer in holders:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        started = time.monotonic()
        try:
            data = await node.fetch(peer, manifest.blob, max_size=manifest.size,
                                    timeout=min(left, max(10.0, manifest.size / MIN_RATE)))
        except P2PError as e:  # BlobHashMismatch, BlobNotFound, timeout, unknown peer...
            log(f"model: fetching blob {manifest.blob[:16]} from {peer[:8]} failed: {e}")
            continue
        if len(data) != manifest.size:
            log(f"model: {peer[:8]} sent {len(data)} bytes, the manifest says {manifest.size}")
            continue
        log(f"model: fetched {manifest.size:,} bytes from {peer[:8]} in "
            f"{time.monotonic() - started:.1f}s")
        return data
    return None


async def fetch_model(node, peers, step: int, layout: str, max_size: int, log=None,
                      timeout=300.0, request_timeout=10.0, retry_delay=2.0):
    """(ModelManifest, blob bytes) that a majority of the answering peers offer for `step` and
    `layout`, the bytes verified against the manifest's blob hash. `peers()` returns the ids of
    the peers to ask (asked again on each attempt: the epoch's clients can change). Raises
    ModelSharingError when nothing verified arrives within `timeout` seconds. Progress goes to
    `log(line)` when given (the client's prefixed lines), else to this module's logger."""
    log = log or logger.info
    deadline = time.monotonic() + timeout
    attempt = 0
    while True:
        attempt += 1
        ids = list(peers())
        if not ids:
            log(f"model: attempt {attempt}: no peers to ask yet")
        else:
            wait = min(request_timeout, max(1.0, deadline - time.monotonic()))
            answers = await _ask_all(node, ids, wait, log)
            best, holders, notes = choose_majority(answers, step, layout)
            for line in notes:
                log(f"model: {line}")
            none = sum(1 for m in answers.values() if m is None)
            if best is None:
                log(f"model: attempt {attempt}: no snapshot for step {step} agreed on by "
                    f"{len(ids)} peers ({none} without one or unreachable)")
            elif best.size > max_size:
                log(f"model: the peers' snapshot is {best.size:,} bytes, more than a model of "
                    f"this shape can take ({max_size:,})")
            else:
                log(f"model: attempt {attempt}: {len(holders)} of {len(ids)} peers offer params "
                    f"{best.params[:16]} for step {step} ({best.size:,} bytes)")
                data = await _fetch_from(node, best, holders, deadline, log)
                if data is not None:
                    return best, data
        if deadline - time.monotonic() <= retry_delay:
            raise ModelSharingError(
                f"no verified model for step {step} from the epoch's peers after {attempt} "
                f"attempts in {timeout:.0f}s")
        await asyncio.sleep(retry_delay)
