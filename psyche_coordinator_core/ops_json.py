"""Operations as JSON: bytes as lowercase hex, config and checkpoint as objects.

One encoding serves the conformance vectors (which the Rust program replays) and the
centralized server's wire messages, so both speak the same operations."""

import json
import math
import re

from .config import RunConfig
from .errors import CoordinatorError
from .state import Checkpoint, CheckpointKind

HEX = re.compile(r"(?:[0-9a-f]{2})*")
BYTES_ARGS = {"signer", "p2p_identity", "identity", "participant_bloom", "broadcast_bloom",
              "broadcast_merkle", "param_hash", "spec_hash"}
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
    "update": {"config", "checkpoint", "spec_hash"},
}
OPTIONAL = {("checkpoint", "revision"), ("join", "identity"), ("update", "config"),
            ("update", "checkpoint"), ("update", "spec_hash")}
MAX_DEPTH = 128  # nested arrays and objects; serde_json refuses the 129th level


class MalformedJson(ValueError):
    """Text that is not JSON as both cores read it (`loads`); the server answers "Malformed"."""

    code = "Malformed"


def _int(text: str):
    # serde_json (the Rust side) keeps integers in [-2^63, 2^64) as integers; "-0" and anything
    # wider it reads as a float, and a float it cannot represent is an error
    if text != "-0" and len(text) <= 21:
        v = int(text)
        if -(1 << 63) <= v < 1 << 64:
            return v
    return _float(text)


def _float(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise MalformedJson(f"number out of range: {text[:40]}")
    return v


def _constant(name: str):
    raise MalformedJson(f"{name} is not JSON")


def _check(v, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise MalformedJson(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedJson("a string holds a lone surrogate (\\ud800-\\udfff)") from None
    elif isinstance(v, dict):
        for k, x in v.items():
            _check(k, depth)
            _check(x, depth + 1)
    elif isinstance(v, list):
        for x in v:
            _check(x, depth + 1)


def loads(text):
    """JSON text read as the Rust core reads it (serde_json): the same documents accepted, the
    same values. Beyond `json.loads`: NaN and Infinity, numbers out of a double's range, lone
    surrogates in strings and nesting deeper than MAX_DEPTH are MalformedJson; "-0" and integers
    outside [-2^63, 2^64) are floats (so not integers to `decode_args`), as serde_json reads
    them. Duplicate keys: the last one wins, in both. Bytes must be UTF-8."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedJson(f"not UTF-8: {e}") from None
    if not isinstance(text, str):
        raise MalformedJson(f"JSON text is a string, not {type(text).__name__}")
    try:
        v = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except MalformedJson:
        raise
    except RecursionError:
        raise MalformedJson(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # json.JSONDecodeError
        raise MalformedJson(str(e)) from None
    _check(v, 1 if isinstance(v, (dict, list)) else 0)
    return v


def _is_text(v) -> bool:
    """A string the Rust side can hold: UTF-8, so no lone surrogates (which `loads` refuses
    already; a dict built in Python may still carry one)."""
    if not isinstance(v, str):
        return False
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    if not _is_text(repo) or not _is_text(revision):
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
    # in sorted key order, as the Rust decoder (serde_json's map is sorted): with two wrong
    # arguments of different codes both name the same one
    for k, v in sorted(args.items()):
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
            if not _is_text(v):
                raise CoordinatorError("InvalidOperation", f"{k} must be a string")
            out[k] = v
        else:  # index, step: unsigned on the wire, as in the Rust program
            if type(v) is not int or not 0 <= v < 1 << 32:
                raise CoordinatorError("InvalidOperation", f"{k} must be an integer in [0, 2^32)")
            out[k] = v
    return {k: out[k] for k in args}  # the document's order, as given
