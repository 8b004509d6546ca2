"""What a witness checks of a peer's result before it vouches for it: the payload decodes
against the run's model (format, shapes, chunking, k, index bounds, finite values, a size the
model allows) and is not an all-zero update; and a fingerprint of its indices, so that a copy
of another result (the same indices, values touched or not) is recognised (client/copies.py
compares fingerprints).

Nothing here needs the model's weights: the layout comes from the model's shapes and the
optimizer's settings, so results are checked from the first one received, while the model is
still loading, on a thread beside the training."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .dct import ChunkedDCT
from .distro import SparseParam
from .payload import decode_payload

# sampled chunks per fingerprint: enough that a copy with a few indices changed still matches
# most of them, small enough to keep a round's fingerprints in memory (8 bytes each)
FINGERPRINT_CHUNKS = 512
# chunks whose top-k is most of the chunk pick near-identical indices on any data: left out
MIN_CHUNK_SPREAD = 4


def result_layout(shapes: Sequence[tuple], chunk: int, topk: int, one_bit: bool) -> list[tuple]:
    """Per parameter (shape, chunk, k, one_bit), as DistroOptimizer.layout() gives it."""
    out = []
    for shape in shapes:
        t = ChunkedDCT(tuple(shape), chunk)
        out.append((t.shape, t.chunk, min(max(topk, 1), t.totalk), one_bit))
    return out


def max_payload_bytes(layout: Sequence[tuple]) -> int:
    """An upper bound on an honest payload's size for this layout (u32 indices, fp32 values,
    every header; the encoder's Rice parameter never codes an index in more than 26 bits):
    anything larger is refused before it is decoded."""
    total = 12
    for shape, (h, w), k, _ in layout:
        rows_cols = 1
        for d in shape:
            rows_cols *= d
        n = rows_cols // (h * w) * k
        total += 1 + 4 * len(shape) + 17 + 5 + 8 + 8 * n + 4  # + padding bytes
    return total


def check_payload(payload: bytes, layout: Sequence[tuple]) -> list[SparseParam]:
    """The decoded parameters, or ValueError saying what is wrong with the payload."""
    params = decode_payload(payload, layout=layout, max_bytes=max_payload_bytes(layout))
    if not params[0].one_bit and all(not bool(sp.values.any()) for sp in params):
        raise ValueError("an all-zero update")
    return params


def fingerprint(params: Sequence[SparseParam]) -> np.ndarray:
    """Hashes of the index rows of up to FINGERPRINT_CHUNKS chunks, picked the same way for
    every result of the run (an even stride over the chunks of the parameters whose chunks are
    at least MIN_CHUNK_SPREAD times k)."""
    rows = [sp.indices for sp in params if sp.totalk >= MIN_CHUNK_SPREAD * sp.k]
    if not rows:
        return np.zeros(0, dtype=np.uint64)
    total = sum(int(r.shape[0]) for r in rows)
    stride = max(1, total // FINGERPRINT_CHUNKS)
    out, offset = [], 0
    for r in rows:
        n = int(r.shape[0])
        first = (-offset) % stride
        picked = r[first::stride].numpy().astype(np.uint64)
        offset += n
        if picked.size:
            # a polynomial hash of each row, wrapping in 64 bits: equal rows hash equal
            weights = np.uint64(0x9E3779B97F4A7C15) ** np.arange(1, picked.shape[1] + 1,
                                                                   dtype=np.uint64)
            out.append((picked * weights).sum(axis=1, dtype=np.uint64))
    return np.concatenate(out)[:FINGERPRINT_CHUNKS]

