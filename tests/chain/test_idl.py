"""The legacy IDL anchorpy reads must agree, byte for byte, with the program's new-format IDL."""
import hashlib
import json
import struct

import anchorpy
import pytest
from anchorpy.coder.accounts import AccountsCoder
from anchorpy.coder.instruction import InstructionCoder
from anchorpy.program.namespace.types import _build_types
from pyheck import snake
from solders.pubkey import Pubkey

from psyche_client.chain.idl import IDL_PATH, LEGACY_IDL_PATH, load_idl, program_id, to_legacy
from psyche_coordinator_core.canonical import CONFIG_FIELDS

NEW = json.loads(IDL_PATH.read_text())
NEW_IX = {ix["name"]: ix for ix in NEW["instructions"]}
# RunConfigParams in borsh order: the six u64, three u32, eight u16, four u8, three u64, one u32,
# one u16
RUN_CONFIG = dict(
    warmup_time=1, cooldown_time=2, max_round_train_time=3, round_witness_time=4, epoch_time=5,
    global_batch_size_warmup_tokens=6, total_steps=7, max_seq_len=8, checkpoint_interval=17,
    min_clients=9,
    init_min_clients=10, witness_nodes=11, global_batch_size_start=12, global_batch_size_end=13,
    max_clients=18, max_syncing=19, kept_rounds=20,
    verification_percent=14, checkpointer_percent=15, waiting_for_members_extra_time=16,
    sync_warmup_rounds=21, flops_per_token=22, tokens_per_compute_point=23, points_cap=24,
    presence_points=25, evidence_quorum=26, verify_sample=27)
CONFIG_FORMAT = "<6Q3I8H4B3QIHB"


@pytest.fixture(scope="module")
def idl():
    return load_idl()


@pytest.fixture(scope="module")
def coder(idl):
    return InstructionCoder(idl)


def u32(n):
    return struct.pack("<I", n)


def borsh_str(s):
    return u32(len(s.encode())) + s.encode()


def test_checked_in_legacy_idl_is_fresh():
    assert json.loads(LEGACY_IDL_PATH.read_text()) == to_legacy(NEW), \
        "stale idl/psyche_coordinator.legacy.json: run scripts/build-idl --legacy-only"


def test_anchorpy_parses_it(idl):
    assert [snake(ix.name) for ix in idl.instructions] == list(NEW_IX)
    assert sorted(a.name for a in idl.accounts) == sorted(a["name"] for a in NEW["accounts"])
    assert [(e.code, e.name) for e in idl.errors] == [(e["code"], e["name"]) for e in NEW["errors"]]
    assert str(program_id()) == NEW["address"]
    # anchorpy snake-cases the legacy camelCase names back; every name must round-trip.
    for ix in NEW["instructions"]:
        legacy = next(i for i in idl.instructions if snake(i.name) == ix["name"])
        assert [snake(a.name) for a in legacy.args] == [a["name"] for a in ix["args"]]
        assert [snake(a.name) for a in legacy.accounts] == [a["name"] for a in ix["accounts"]]


def test_every_instruction_discriminator_matches(coder):
    for name, ix in NEW_IX.items():
        assert coder.sighashes[name] == bytes(ix["discriminator"]), name


def test_encode_join_run(coder):
    ident, identity = bytes(range(32)), Pubkey(bytes([8]) * 32)
    data = coder.encode("join_run", {"p2p_identity": ident, "identity": identity})
    assert data == bytes(NEW_IX["join_run"]["discriminator"]) + ident + bytes(identity)
    # [u8; 32] also takes a list of ints.
    assert coder.encode("join_run", {"p2p_identity": list(ident), "identity": identity}) == data
    assert [a["name"] for a in NEW_IX["join_run"]["accounts"]] == [
        "user", "coordinator_instance", "coordinator_account", "authorization", "contributor",
        "system_program"]


def test_encode_points_instructions(coder):
    keys = [Pubkey(bytes([i]) * 32) for i in (1, 2)]
    data = coder.encode("set_delegates", {"delegates": keys})
    assert data == (bytes(NEW_IX["set_delegates"]["discriminator"]) + u32(2)
                    + b"".join(bytes(k) for k in keys))
    assert [a["name"] for a in NEW_IX["set_delegates"]["accounts"]] == [
        "payer", "identity", "coordinator_instance", "contributor", "system_program"]
    data = coder.encode("settle_points", {"index": 7, "identity": keys[0]})
    assert data == bytes(NEW_IX["settle_points"]["discriminator"]) + u32(7) + bytes(keys[0])
    assert [a["name"] for a in NEW_IX["settle_points"]["accounts"]] == [
        "user", "coordinator_instance", "coordinator_account", "contributor"]


def test_encode_evidence(coder):
    data = coder.encode("evidence", {"index": 3, "step": 9, "target": 258})
    assert data == (bytes(NEW_IX["evidence"]["discriminator"]) + u32(3) + u32(9)
                    + struct.pack("<H", 258))
    assert [a["name"] for a in NEW_IX["evidence"]["accounts"]] == [
        a["name"] for a in NEW_IX["health_check"]["accounts"]]


def test_decode_contributor(idl):
    disc = hashlib.sha256(b"account:Contributor").digest()[:8]
    instance, identity, node = (Pubkey(bytes([i]) * 32) for i in (3, 4, 5))
    raw = (disc + b"\xfd" + bytes(instance) + bytes(identity) + u32(1) + bytes(node)
           + struct.pack("<6Q", 1, 2, 3, 4, 5, 6))
    raw += bytes(381 - len(raw))  # the account's fixed size: room for 8 delegates
    d = AccountsCoder(idl).decode(raw)
    assert (d.bump, d.coordinator_instance, d.identity, d.delegates) == (
        253, instance, identity, [node])
    assert (d.presence_rounds, d.sequences, d.tokens, d.token_carry, d.presence_points,
            d.compute_points) == (1, 2, 3, 4, 5, 6)


def test_encode_witness_layout(coder):
    pb, bb, merkle = bytes([1]) * 356, bytes(range(256)) + bytes(100), bytes([7]) * 32
    params = bytes(range(32))
    data = coder.encode("witness", {"index": 3, "step": 258, "participant_bloom": pb,
                                    "broadcast_bloom": bb, "broadcast_merkle": list(merkle),
                                    "param_hash": params})
    expected = (bytes(NEW_IX["witness"]["discriminator"]) + u32(3) + u32(258)
                + u32(356) + pb + u32(356) + bb + merkle + params)
    assert data == expected
    # `bytes` (Vec<u8>) wants bytes: anchorpy rejects a list of ints there.
    with pytest.raises(Exception):
        coder.encode("witness", {"index": 3, "step": 258, "participant_bloom": list(pb),
                                 "broadcast_bloom": bb, "broadcast_merkle": merkle,
                                 "param_hash": params})


def test_encode_checkpoint_layout(coder):
    params = bytes([9]) * 32
    data = coder.encode("checkpoint", {"index": 2, "repo": "ab" * 32, "revision": "",
                                       "step": 77, "param_hash": params})
    assert data == (bytes(NEW_IX["checkpoint"]["discriminator"]) + u32(2) + borsh_str("ab" * 32)
                    + borsh_str("") + u32(77) + params)


def test_encode_synced_and_resync(coder):
    params = bytes(range(32, 64))
    data = coder.encode("synced", {"index": 4, "step": 70000, "param_hash": params})
    assert data == bytes(NEW_IX["synced"]["discriminator"]) + u32(4) + u32(70000) + params
    data = coder.encode("resync", {"index": 5})
    assert data == bytes(NEW_IX["resync"]["discriminator"]) + u32(5)


def test_run_config_params_are_the_canonical_config():
    # the instruction argument's fields are the core's config, in its canonical order
    fields = next(t for t in NEW["types"] if t["name"] == "RunConfigParams")["type"]["fields"]
    assert [f["name"] for f in fields] == list(CONFIG_FIELDS) == list(RUN_CONFIG)


def test_encode_init_coordinator(idl, coder):
    main, join = Pubkey(bytes([1]) * 32), Pubkey(bytes([2]) * 32)
    args = {"run_id": "my-run", "main_authority": main, "join_authority": join,
            "permissionless": True, "config": RUN_CONFIG, "run_seed": 2**40 + 5}
    data = coder.encode("init_coordinator", args)
    cfg = struct.pack(CONFIG_FORMAT, *RUN_CONFIG.values())
    assert data == (bytes(NEW_IX["init_coordinator"]["discriminator"]) + borsh_str("my-run")
                    + bytes(main) + bytes(join) + b"\x01" + cfg + struct.pack("<Q", 2**40 + 5))
    # A defined struct may be a dict or anchorpy's generated dataclass.
    config_cls = _build_types(idl)["RunConfigParams"]
    assert coder.encode("init_coordinator", {**args, "config": config_cls(**RUN_CONFIG)}) == data


def test_encode_update_options(idl, coder):
    disc = bytes(NEW_IX["update"]["discriminator"])
    assert coder.encode("update", {"config": None, "checkpoint": None,
                                   "spec_hash": None}) == disc + b"\x00\x00\x00"
    types = _build_types(idl)
    # Enum values must be anchorpy's variant objects (not dicts or strings).
    kind = types["CheckpointKindParam"]
    checkpoint = {"kind": kind.Stored(), "repo": "org/model", "revision": "main",
                  "hash": list(range(32)), "step": 9}
    data = coder.encode("update", {"config": RUN_CONFIG, "checkpoint": checkpoint,
                                   "spec_hash": [7] * 32})
    assert data == (disc + b"\x01" + struct.pack(CONFIG_FORMAT, *RUN_CONFIG.values())
                    + b"\x01" + b"\x03" + borsh_str("org/model") + borsh_str("main")
                    + bytes(range(32)) + u32(9) + b"\x01" + bytes([7] * 32))
    kind_def = next(t for t in NEW["types"] if t["name"] == "CheckpointKindParam")
    assert [v["name"] for v in kind_def["type"]["variants"]] == ["Dummy", "Hub", "P2P", "Stored"]


def test_encode_set_run_spec(coder):
    disc = bytes(NEW_IX["set_run_spec"]["discriminator"])
    data = coder.encode("set_run_spec", {"total_len": 1500, "offset": 800, "chunk": b"abc"})
    assert data == disc + u32(1500) + u32(800) + u32(3) + b"abc"


def test_decode_coordinator_instance(idl):
    disc = hashlib.sha256(b"account:CoordinatorInstance").digest()[:8]
    assert list(disc) == next(a["discriminator"] for a in NEW["accounts"]
                              if a["name"] == "CoordinatorInstance")
    main, join, acct = (Pubkey(bytes([i]) * 32) for i in (3, 4, 5))
    raw = (disc + b"\xfe" + bytes(main) + bytes(join) + b"\x00" + bytes(acct)
           + borsh_str("run-7"))
    decoded = AccountsCoder(idl).decode(raw)
    assert (decoded.bump, decoded.main_authority, decoded.join_authority, decoded.permissionless,
            decoded.coordinator_account, decoded.run_id) == (254, main, join, False, acct, "run-7")


def _disc(namespace, name):
    return list(hashlib.sha256(f"{namespace}:{name}".encode()).digest()[:8])


SYNTHETIC = {
    "address": "11111111111111111111111111111111",
    "metadata": {"name": "demo", "version": "0.2.0", "spec": "0.1.0"},
    "instructions": [{
        "name": "do_thing", "discriminator": _disc("global", "do_thing"),
        "accounts": [{"name": "the_signer", "writable": True, "signer": True},
                     {"name": "group", "accounts": [{"name": "inner_acc", "optional": True,
                                                     "pda": {"seeds": []}, "relations": ["x"]}]},
                     {"name": "system_program", "address": "11111111111111111111111111111111"}],
        "args": [{"name": "maybe_item", "type": {"option": {"defined": {"name": "Item"}}}},
                 {"name": "keys", "type": {"vec": "pubkey"}},
                 {"name": "grid", "type": {"array": [{"array": ["u8", 2]}, 3]}}],
    }],
    "accounts": [{"name": "Store", "discriminator": _disc("account", "Store")}],
    "events": [{"name": "Done", "discriminator": _disc("event", "Done")}],
    "types": [
        {"name": "Done", "type": {"kind": "struct",
                                  "fields": [{"name": "item_count", "type": "u64"}]}},
        {"name": "Item", "docs": ["an item"], "type": {"kind": "struct", "fields": [
            {"name": "owner_key", "type": "pubkey"},
            {"name": "shape", "type": {"defined": {"name": "Shape"}}}]}},
        {"name": "Shape", "type": {"kind": "enum", "variants": [
            {"name": "Empty"},
            {"name": "Square", "fields": [{"name": "side_len", "type": "u16"}]},
            {"name": "Pair", "fields": ["u8", {"vec": "pubkey"}]}]}},
        {"name": "Store", "serialization": "bytemuck", "repr": {"kind": "c"},
         "type": {"kind": "struct",
                  "fields": [{"name": "raw_state", "type": {"array": ["u8", 4]}}]}},
    ],
    "errors": [{"code": 6000, "name": "Oops", "msg": "oops"}, {"code": 6001, "name": "Bare"}],
}


def test_synthetic_conversion():
    legacy = to_legacy(SYNTHETIC)
    assert (legacy["name"], legacy["version"]) == ("demo", "0.2.0")
    assert legacy["metadata"] == {"address": SYNTHETIC["address"]}
    (ix,) = legacy["instructions"]
    assert ix["name"] == "doThing"
    assert ix["accounts"] == [
        {"name": "theSigner", "isMut": True, "isSigner": True},
        {"name": "group", "accounts": [{"name": "innerAcc", "isMut": False, "isSigner": False,
                                        "isOptional": True}]},
        {"name": "systemProgram", "isMut": False, "isSigner": False}]
    assert ix["args"] == [
        {"name": "maybeItem", "type": {"option": {"defined": "Item"}}},
        {"name": "keys", "type": {"vec": "publicKey"}},
        {"name": "grid", "type": {"array": [{"array": ["u8", 2]}, 3]}}]
    assert legacy["accounts"] == [{"name": "Store", "type": {"kind": "struct", "fields": [
        {"name": "rawState", "type": {"array": ["u8", 4]}}]}}]
    assert legacy["events"] == [{"name": "Done", "fields": [
        {"name": "itemCount", "type": "u64", "index": False}]}]
    assert [t["name"] for t in legacy["types"]] == ["Item", "Shape"]
    assert legacy["types"][0] == {"name": "Item", "docs": ["an item"], "type": {
        "kind": "struct", "fields": [{"name": "ownerKey", "type": "publicKey"},
                                     {"name": "shape", "type": {"defined": "Shape"}}]}}
    assert legacy["types"][1]["type"]["variants"] == [
        {"name": "Empty"},
        {"name": "Square", "fields": [{"name": "sideLen", "type": "u16"}]},
        {"name": "Pair", "fields": ["u8", {"vec": "publicKey"}]}]
    assert legacy["errors"] == [{"code": 6000, "name": "Oops", "msg": "oops"},
                                {"code": 6001, "name": "Bare"}]
    assert "discriminator" not in json.dumps(legacy)
    # And anchorpy takes it, enum with fields included.
    parsed = anchorpy.Idl.from_json(json.dumps(legacy))
    shape = _build_types(parsed)["Shape"]
    data = InstructionCoder(parsed).encode("do_thing", {
        "maybe_item": {"owner_key": Pubkey(bytes(32)), "shape": shape.Square(side_len=5)},
        "keys": [], "grid": [[1, 2], [3, 4], [5, 6]]})
    assert data == (bytes(_disc("global", "do_thing")) + b"\x01" + bytes(32) + b"\x01"
                    + struct.pack("<H", 5) + u32(0) + bytes([1, 2, 3, 4, 5, 6]))


@pytest.mark.parametrize("section,index", [("instructions", 0), ("accounts", 0), ("events", 0)])
def test_custom_discriminator_is_rejected(section, index):
    idl = json.loads(json.dumps(SYNTHETIC))
    idl[section][index]["discriminator"] = [1]
    with pytest.raises(ValueError, match="custom discriminator"):
        to_legacy(idl)


def test_name_that_cannot_round_trip_is_rejected():
    idl = json.loads(json.dumps(SYNTHETIC))
    idl["instructions"][0]["args"][0]["name"] = "item_2x"
    with pytest.raises(ValueError, match="snake_case"):
        to_legacy(idl)
