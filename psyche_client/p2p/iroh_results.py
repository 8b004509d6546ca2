"""Training results over IrohNode: announce the signed header, move the payload as a blob.

A trainer stores the payload as a blob and announces

    {"type": "result_available", "step", "batch": [start, end], "trainer", "commitment",
     "signature", "blob": sha256 hex of the payload, "size": payload bytes}

Whoever needs the result fetches the blob from the announcer (the announcement's "from", set
by the receiving node from the authenticated connection), and gets a TrainingResult whose
commitment and signature are then checked as for any result from a peer."""

import dataclasses

from ..client.results import TrainingResult
from .iroh_node import IrohNode

RESULT_AVAILABLE = "result_available"


def result_announcement(result: TrainingResult, blob: str) -> dict:
    return {"type": RESULT_AVAILABLE, "step": result.step,
            "batch": [result.batch.start, result.batch.end], "trainer": result.trainer.hex(),
            "commitment": result.commitment.hex(), "signature": result.signature.hex(),
            "blob": blob, "size": len(result.payload)}


async def publish_result(node: IrohNode, result: TrainingResult) -> int:
    """Serve the payload and announce it to every peer; returns how many took the announcement."""
    return await node.announce(result_announcement(result, node.add(result.payload)))


async def fetch_result(node: IrohNode, msg: dict, max_size=None, timeout=None) -> TrainingResult:
    """The announced result with its payload, checked. Raises ValueError on a malformed or
    invalid announcement or result, and the node's BlobError family when the fetch fails. A
    size over `max_size` (None: the node's max_blob_size) is refused before any transfer, and
    a blob larger than its announced size as soon as the peer says its size."""
    if msg.get("type") != RESULT_AVAILABLE:
        raise ValueError("not a result announcement")
    size, blob, sender = msg.get("size"), msg.get("blob"), msg.get("from")
    if (type(size) is not int or size < 0
            or not isinstance(blob, str) or not isinstance(sender, str)):
        raise ValueError("malformed result announcement")
    limit = node.max_blob_size if max_size is None else max_size
    if size > limit:
        raise ValueError(f"announced result of {size} bytes exceeds the limit of {limit}")
    header = dict(msg, payload="")
    result = TrainingResult.from_json(header)  # validates the fields before any transfer
    payload = await node.fetch(sender, blob, max_size=size, timeout=timeout)
    if len(payload) != size:
        raise ValueError("fetched payload does not have the announced size")
    result = dataclasses.replace(result, payload=payload)
    why = result.check()
    if why:
        raise ValueError(f"invalid result from {sender}: {why}")
    return result
