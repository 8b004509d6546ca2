"""The coordinator program's IDL for anchorpy.

anchorpy 0.21 parses only the legacy (Anchor <= 0.29) IDL format; Anchor 0.31 generates the new
format (spec 0.1.0, idl/psyche_coordinator.json). `to_legacy` converts one to the other and
scripts/build-idl checks in the result as idl/psyche_coordinator.legacy.json.

This module must stay importable without anchorpy/solders: build-idl runs under a bare python3.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

IDL_DIR = Path(__file__).resolve().parents[2] / "idl"
IDL_PATH = IDL_DIR / "psyche_coordinator.json"
LEGACY_IDL_PATH = IDL_DIR / "psyche_coordinator.legacy.json"

# Names anchorpy's `pyheck.snake` maps back exactly from our camelCase: a word starting with a digit
# ("foo_2bar" -> "foo2bar") or doubled/edge underscores would not round-trip.
_SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z][a-z0-9]*)*")


def _camel(name: str) -> str:
    if not _SNAKE.fullmatch(name):
        raise ValueError(f"IDL name {name!r} is not plain snake_case: anchorpy could not "
                         "recover it from the legacy camelCase name")
    head, *rest = name.split("_")
    return head + "".join(word[0].upper() + word[1:] for word in rest)


def _sighash(namespace: str, name: str) -> list[int]:
    return list(hashlib.sha256(f"{namespace}:{name}".encode()).digest()[:8])


def _check_discriminator(kind: str, item: dict, namespace: str) -> None:
    # The legacy format has no discriminator field: anchorpy always recomputes the default one.
    expected = _sighash(namespace, item["name"])
    if list(item.get("discriminator", expected)) != expected:
        raise ValueError(f"{kind} {item['name']!r} has a custom discriminator "
                         f"{item['discriminator']} (default {expected}); the legacy IDL "
                         "format cannot express it")


def _docs(item: dict) -> dict:
    return {"docs": list(item["docs"])} if item.get("docs") else {}


def _type(ty: Any) -> Any:
    if isinstance(ty, str):
        return "publicKey" if ty == "pubkey" else ty
    if not isinstance(ty, dict) or len(ty) != 1:
        raise ValueError(f"unsupported IDL type {ty!r}")
    (kind, inner), = ty.items()
    if kind in ("option", "vec"):
        return {kind: _type(inner)}
    if kind == "array":
        elem, length = inner
        if not isinstance(length, int):
            raise ValueError(f"unsupported array length {length!r} (generics are not supported)")
        return {"array": [_type(elem), length]}
    if kind == "defined":
        name = inner if isinstance(inner, str) else inner["name"]
        if isinstance(inner, dict) and inner.get("generics"):
            raise ValueError(f"generic type {name!r} is not supported")
        return {"defined": name}
    raise ValueError(f"unsupported IDL type {ty!r}")


def _field(field: dict) -> dict:
    return {"name": _camel(field["name"]), **_docs(field), "type": _type(field["type"])}


def _named(fields: list) -> bool:
    # Tuple fields are bare types; a type dict never has both "name" and "type".
    return all(isinstance(f, dict) and "name" in f and "type" in f for f in fields)


def _fields(fields: list) -> list:
    """Enum variant fields: named, or a tuple's bare types."""
    return [_field(f) for f in fields] if _named(fields) else [_type(ty) for ty in fields]


def _typedef_body(typedef: dict) -> dict:
    ty = typedef["type"]
    if typedef.get("generics"):
        raise ValueError(f"generic type {typedef['name']!r} is not supported")
    if ty["kind"] == "struct":
        fields = ty.get("fields", [])
        if not _named(fields):
            raise ValueError(f"tuple struct {typedef['name']!r}: the legacy format has none")
        return {"kind": "struct", "fields": [_field(f) for f in fields]}
    if ty["kind"] == "enum":
        return {"kind": "enum", "variants": [
            {"name": v["name"], **({"fields": _fields(v["fields"])} if v.get("fields") else {})}
            for v in ty["variants"]]}
    if ty["kind"] == "type":
        return {"kind": "alias", "value": _type(ty["alias"])}
    raise ValueError(f"unsupported type kind {ty['kind']!r} of {typedef['name']!r}")


def _typedef(typedef: dict) -> dict:
    # serialization/repr (zero_copy, bytemuck) have no legacy field: the layout is a plain struct.
    return {"name": typedef["name"], **_docs(typedef), "type": _typedef_body(typedef)}


def _account_meta(acc: dict) -> dict:
    if "accounts" in acc:  # a nested `#[derive(Accounts)]` group
        return {"name": _camel(acc["name"]),
                "accounts": [_account_meta(a) for a in acc["accounts"]]}
    meta = {"name": _camel(acc["name"]), "isMut": bool(acc.get("writable")),
            "isSigner": bool(acc.get("signer"))}
    if acc.get("optional"):
        meta["isOptional"] = True
    return {**meta, **_docs(acc)}


def _instruction(ix: dict) -> dict:
    _check_discriminator("instruction", ix, "global")
    out = {"name": _camel(ix["name"]), **_docs(ix),
           "accounts": [_account_meta(a) for a in ix["accounts"]],
           "args": [_field(a) for a in ix["args"]]}
    if ix.get("returns") is not None:
        out["returns"] = _type(ix["returns"])
    return out


def to_legacy(idl: dict) -> dict:
    """Convert a new-format (Anchor >= 0.30, spec 0.1.0) IDL to the legacy format anchorpy reads.

    Raises ValueError where the legacy format cannot express the program: custom
    discriminators, generics, tuple structs, names that do not survive camelCase.
    """
    types = {t["name"]: t for t in idl.get("types", [])}
    owned = set()  # typedefs that become legacy accounts/events instead of types

    def take(kind: str, item: dict, namespace: str) -> dict:
        _check_discriminator(kind, item, namespace)
        if item["name"] not in types:
            raise ValueError(f"{kind} {item['name']!r} has no type definition")
        owned.add(item["name"])
        return types[item["name"]]

    accounts = [_typedef(take("account", a, "account")) for a in idl.get("accounts", [])]
    events = []
    for ev in idl.get("events", []):
        body = _typedef_body(take("event", ev, "event"))
        if body["kind"] != "struct":
            raise ValueError(f"event {ev['name']!r} is not a struct")
        events.append({"name": ev["name"],
                       "fields": [{**f, "index": False} for f in body["fields"]]})

    meta = idl.get("metadata", {})
    legacy = {"version": meta.get("version", "0.0.0"), "name": meta["name"], **_docs(idl),
              "instructions": [_instruction(ix) for ix in idl["instructions"]],
              "accounts": accounts,
              "types": [_typedef(t) for name, t in types.items() if name not in owned]}
    if idl.get("constants"):
        legacy["constants"] = [{"name": c["name"], "type": _type(c["type"]), "value": c["value"]}
                               for c in idl["constants"]]
    if events:
        legacy["events"] = events
    if idl.get("errors"):
        legacy["errors"] = [{"code": e["code"], "name": e["name"],
                             **({"msg": e["msg"]} if "msg" in e else {})} for e in idl["errors"]]
    legacy["metadata"] = {"address": idl["address"]}
    return legacy


def legacy_text(idl: dict) -> str:
    """The checked-in form of `to_legacy(idl)` (what scripts/build-idl writes)."""
    return json.dumps(to_legacy(idl), indent=2) + "\n"


def load_idl():
    """The checked-in legacy IDL as an `anchorpy.Idl`."""
    from anchorpy import Idl

    return Idl.from_json(LEGACY_IDL_PATH.read_text())


def program_id():
    """The coordinator program's address (`solders.pubkey.Pubkey`) from the legacy IDL."""
    from solders.pubkey import Pubkey

    return Pubkey.from_string(json.loads(LEGACY_IDL_PATH.read_text())["metadata"]["address"])
