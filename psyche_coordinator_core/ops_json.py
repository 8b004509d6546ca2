"""Operations as JSON: bytes as lowercase hex, config and checkpoint as objects.

One encoding serves the conformance vectors (which the Rust program replays) and the
centralized server's wire messages, so both speak the same operations."""

import re

from .config import RunConfig
from .errors import CoordinatorError
from .state import Checkpoint, CheckpointKind

HEX = re.compile(r"(?:[0-9a-f]{2})*")
BYTES_ARGS = {"signer", "p2p_identity", "identity", "participant_bloom", "broadcast_bloom",
              "broadcast_merkle", "param_hash"}
ARGS = {
    "tick": set(),
    "join": {"signer", "p2p_identity", "identity"},
    "withdraw": {"signer"},
    "warmup_witness": {"signer", "index"},
    "witness": {"signer", "index", "step", "participant_bloom", "broadcast_bloom",
                "broadcast_merkle", "param_hash"},
    "health_check": {"signer", "index", "targets"},
    "evidence": {"signer", "index", "step", "target"},
    "checkpoint": {"signer", "index", "repo", "revision", "step", "param_hash"},
    "synced": {"signer", "index", "step", "param_hash"},
    "resync": {"signer", "index"},
    "settle": {"index"},
    "pause": set(),
    "resume": set(),
    "update": {"config", "checkpoint"},
}
OPTIONAL = {("checkpoint", "revision"), ("join", "identity"), ("update", "config"),
            ("update", "checkpoint")}


def checkpoint_to_json(ck: Checkpoint) -> dict:
    return {"kind": CheckpointKind(ck.kind).name, "repo": ck.repo, "revision": ck.revision,
            "hash": ck.hash.hex(), "step": ck.step}


def checkpoint_from_json(d) -> Checkpoint:
    if not isinstance(d, dict):
        raise CoordinatorError("InvalidOperation", "checkpoint must be an object")
    unknown = sorted(set(d) - {"kind", "repo", "revision", "hash", "step"})
    if unknown:
        raise CoordinatorError("InvalidOperation", f"checkpoint: unknown key {unknown[0]!r}")
    kind = d.get("kind")
    if not isinstance(kind, str) or kind not in CheckpointKind.__members__:
        raise CoordinatorError("InvalidCheckpoint",
                               f"checkpoint.kind must be one of {list(CheckpointKind.__members__)}")
    repo, revision = d.get("repo", ""), d.get("revision", "")
    if not isinstance(repo, str) or not isinstance(revision, str):
        raise CoordinatorError("InvalidOperation", "checkpoint repo and revision are strings")
    digest, step = d.get("hash", "00" * 32), d.get("step", 0)
    if not isinstance(digest, str) or not HEX.fullmatch(digest) or len(digest) != 64:
        raise CoordinatorError("InvalidOperation",
                               "checkpoint.hash must be 64 lowercase hex digits")
    if type(step) is not int or not 0 <= step < 1 << 32:
        raise CoordinatorError("InvalidOperation",
                               "checkpoint.step must be an integer in [0, 2^32)")
    return Checkpoint(CheckpointKind[kind], repo, revision, bytes.fromhex(digest), step)


def encode_args(op: str, args: dict) -> dict:
    out = {}
    for k, v in args.items():
        if k in BYTES_ARGS:
            out[k] = bytes(v).hex()
        elif k == "config":
            out[k] = v.to_dict()
        elif k == "checkpoint":
            out[k] = checkpoint_to_json(v)
        else:
            out[k] = v
    return out


def decode_args(op: str, args) -> dict:
    """Typed arguments for `coordinator.apply`; a CoordinatorError names what is wrong."""
    if op not in ARGS:
        raise CoordinatorError("InvalidOperation", f"unknown operation {op!r}")
    if not isinstance(args, dict):
        raise CoordinatorError("InvalidOperation", "args must be an object")
    unknown = set(args) - ARGS[op]
    missing = {k for k in ARGS[op] - set(args) if (op, k) not in OPTIONAL}
    if unknown or missing:
        raise CoordinatorError("InvalidOperation",
                               f"{op}: unknown args {sorted(unknown)}, missing {sorted(missing)}")
    out = {}
    for k, v in args.items():
        if k in BYTES_ARGS:
            if not isinstance(v, str) or not HEX.fullmatch(v):
                raise CoordinatorError("InvalidOperation", f"{k} must be lowercase hex: "
                                       "pairs of [0-9a-f], nothing else")
            out[k] = bytes.fromhex(v)
        elif k == "config":
            if not isinstance(v, dict):
                raise CoordinatorError("InvalidOperation", "config must be an object")
            out[k] = RunConfig.from_dict(v)
        elif k == "checkpoint":
            out[k] = checkpoint_from_json(v)
        elif k == "targets":
            if not isinstance(v, list) or not all(type(t) is int and 0 <= t < 1 << 16 for t in v):
                raise CoordinatorError("InvalidOperation",
                                       "targets must be a list of integers in [0, 65536)")
            out[k] = list(v)
        elif k == "target":  # a client index, u16 on the wire like health_check's targets
            if type(v) is not int or not 0 <= v < 1 << 16:
                raise CoordinatorError("InvalidOperation",
                                       "target must be an integer in [0, 65536)")
            out[k] = v
        elif k in ("repo", "revision"):
            if not isinstance(v, str):
                raise CoordinatorError("InvalidOperation", f"{k} must be a string")
            out[k] = v
        else:  # index, step: unsigned on the wire, as in the Rust program
            if type(v) is not int or not 0 <= v < 1 << 32:
                raise CoordinatorError("InvalidOperation", f"{k} must be an integer in [0, 2^32)")
            out[k] = v
    return out
