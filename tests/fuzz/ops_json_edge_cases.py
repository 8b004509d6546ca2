"""Edge cases of the operations' JSON that the Python core and the Rust core must read alike:
`python -m tests.fuzz.ops_json_edge_cases` writes ops_json_edge_cases.json next to this file.

Each case is {"name", "op", "args": the JSON *text* of the arguments (so that -0, duplicate
keys, lone surrogates and bad syntax survive the file), "error"}: `error` is what the Python
side answers: null (accepted), "Malformed" (ops_json.loads refuses the text) or the
CoordinatorError code of ops_json.decode_args. tests/fuzz/test_ops_json_parity.py checks that
the file is what this generator makes today and replays it; the Rust core's
`ops_json_edge_cases` test (programs/psyche-coordinator/core/tests/conformance.rs) parses each
text with serde_json (an error: "Malformed") and decodes it with its mirror of decode_args, and
must give the same answer for every case. Deterministic: the mutations use a fixed seed."""

import json
import random
import sys
from pathlib import Path

from psyche_coordinator_core import CoordinatorError
from psyche_coordinator_core.ops_json import MalformedJson, decode_args, loads

OUT = Path(__file__).resolve().parent / "ops_json_edge_cases.json"
K, H = "ab" * 32, "cd" * 32
VALID = {  # one valid argument text per operation, the slots below substituted into them
    "tick": "{}",
    "join": f'{{"signer": "{K}", "p2p_identity": "{K}"}}',
    "withdraw": f'{{"signer": "{K}"}}',
    "warmup_witness": f'{{"signer": "{K}", "index": 0}}',
    "witness": f'{{"signer": "{K}", "index": 1, "step": 2, "participant_bloom": "00ff", '
               f'"broadcast_bloom": "", "broadcast_merkle": "{H}", "param_hash": "{H}"}}',
    "health_check": f'{{"signer": "{K}", "index": 0, "targets": [1, 2]}}',
    "checkpoint": f'{{"signer": "{K}", "index": 0, "repo": "r", "step": 3, "param_hash": "{H}"}}',
    "synced": f'{{"signer": "{K}", "index": 1, "step": 9, "param_hash": "{H}"}}',
    "resync": f'{{"signer": "{K}", "index": 2}}',
    "settle": '{"index": 0}',
    "update": '{"config": {"epoch_time": 100}, "checkpoint": {"kind": "Hub", "repo": "a"}}',
}
NUMBERS = ["0", "-0", "-0.0", "0.0", "1", "1.0", "1e3", "1E0", "1e-400", "0e999999", "-1",
           "65535", "65536", "4294967295", "4294967296", "18446744073709551615",
           "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
           "1" * 30, "1" * 400, "1e400", "-1e400", "1e308", "1.7976931348623157e308",
           "1.7976931348623159e308", "NaN", "Infinity", "-Infinity", "true", "false", "null",
           '"1"', "[1]", "{}", "01", "-01", "+1", ".5", "1.", "-", "1e", "1e+", "0x10", "1_000"]
STRINGS = ['"r"', '""', '"\\ud800"', '"\\udc00"', '"a\\ud800b"', '"\\ud800\\ud800"',
           '"\\udc00\\ud800"', '"\\ud83d\\ude00"', '"\\uD83D\\uDE00"', '"\\ud800\\u0041"',
           '"\\u0000"', '"a\\u0000b"', '"\\u00e9"', '"é"', '"\U0001f600"', '"\x01"', '"\x7f"',
           '"\\x41"', '"\\U0041"', '"\\u12"', '"\\u12g4"', '"\\/"', "'r'", '"r', "r", "5",
           "null", '["r"]']
HEXES = [f'"{K}"', f'"{K.upper()}"', f'"{K[:-1]}"', '""', '"0"', '"zz"', f'" {K}"',
         f'"{K}\\n"', '"\\u0061b"', '"ab\\ud800"', "[]", "171"]
STRUCTURE = [  # (op, args text): whole documents
    ("tick", ""), ("tick", " "), ("tick", "[]"), ("tick", "null"), ("tick", '"x"'),
    ("tick", "5"), ("tick", "{} x"), ("tick", "{},"), ("tick", "{"), ("tick", "}"),
    ("tick", "\ufeff{}"), ("tick", "{}\n"), ("tick", "\t{ }\r\n"), ("tick", "\f{}"),
    ("tick", "\u00a0{}"), ("tick", "{/* c */}"), ("tick", '{"a": 1,}'), ("tick", '{"a" 1}'),
    ("tick", "{'a': 1}"), ("tick", '{"\\ud800": 1}'), ("tick", '{"": 1}'),
    ("frobnicate", "{}"), ("", "{}"),
    ("withdraw", f'{{"signer": "{K}", "signer": "zz"}}'),
    ("withdraw", f'{{"signer": "zz", "signer": "{K}"}}'),
    ("withdraw", f'{{"signer": "{K}", "extra": 1}}'), ("withdraw", "{}"),
    ("join", f'{{"signer": "{K}", "p2p_identity": "{K}", "identity": null}}'),
    ("join", f'{{"signer": "{K}", "p2p_identity": "{K}", "identity": "{K}"}}'),
    ("checkpoint", f'{{"signer": "{K}", "index": 0, "repo": "r", "revision": "v", "step": 3, '
                   f'"param_hash": "{H}"}}'),
    # two wrong arguments with different codes: both decode in sorted key order
    ("update", '{"config": {"nope": 1}, "checkpoint": 5}'),
    ("update", '{"checkpoint": 5, "config": {"nope": 1}}'),
    ("update", '{"config": {"epoch_time": 1.0}, "checkpoint": {"kind": "Gcs"}}'),
    ("update", '{"config": {"epoch_time": 100, "epoch_time": 0}}'),
    ("update", '{"config": {"epoch_time": 0, "epoch_time": 100}}'),
    ("update", '{"checkpoint": {"kind": "Hub", "repo": "a", "kind": "Nope"}}'),
    ("update", '{"checkpoint": {"kind": "Stored", "repo": "a", "hash": "' + H + '", '
               '"step": 4294967295}}'),
    ("update", '{"config": {"tokens_per_compute_point": 18446744073709551615}}'),
    ("update", '{"config": {"tokens_per_compute_point": 18446744073709551616}}'),
    ("update", '{"config": {"points_cap": -0}}'), ("update", '{"config": {"points_cap": 0}}'),
    ("update", '{"config": []}'), ("update", '{"config": null}'), ("update", "{}"),
    ("update", '{"config": {"epoch_time": 100}, "config": 5}'),
    ("update", '{"spec_hash": 5, "config": {"nope": 1}}'),
    ("update", '{"spec_hash": "' + H + '", "checkpoint": {"kind": "Gcs"}}'),
    ("update", '{"spec_hash": null}'), ("update", '{"spec_hash": "' + H + H + '"}'),
]


def nested(depth: int, inner: str = "1") -> str:
    """`depth` levels in all: the args object, then arrays."""
    return '{"config": ' + "[" * (depth - 1) + inner + "]" * (depth - 1) + "}"


def substituted():
    """Each edge value in each slot of its kind."""
    k = f'"{K}"'
    number_slots = [
        ("warmup_witness", lambda v: f'{{"signer": {k}, "index": {v}}}'),
        ("synced", lambda v: f'{{"signer": {k}, "index": 0, "step": {v}, "param_hash": "{H}"}}'),
        ("health_check", lambda v: f'{{"signer": {k}, "index": 0, "targets": [{v}]}}'),
        ("update", lambda v: f'{{"config": {{"epoch_time": {v}}}}}'),
        ("update", lambda v: f'{{"config": {{"tokens_per_compute_point": {v}}}}}'),
        ("update", lambda v: f'{{"checkpoint": {{"kind": "Hub", "repo": "a", "step": {v}}}}}'),
    ]
    for op, make in number_slots:
        for v in NUMBERS:
            yield op, make(v)
    string_slots = [
        ("checkpoint", lambda v: f'{{"signer": {k}, "index": 0, "repo": {v}, "step": 3, '
                                 f'"param_hash": "{H}"}}'),
        ("update", lambda v: f'{{"checkpoint": {{"kind": "Hub", "repo": "a", "revision": {v}}}}}'),
        ("update", lambda v: f'{{"checkpoint": {{"kind": {v}, "repo": "a"}}}}'),
    ]
    for op, make in string_slots:
        for v in STRINGS:
            yield op, make(v)
    for v in HEXES:
        yield "withdraw", f'{{"signer": {v}}}'
        yield "update", f'{{"checkpoint": {{"kind": "Stored", "repo": "a", "hash": {v}}}}}'
        yield "update", f'{{"spec_hash": {v}}}'
    for depth in (2, 126, 127, 128, 129, 1000):
        yield "update", nested(depth)


ALPHABET = list('{}[]",:0123456789-+.eE \\/uabdfnrtxz') + ["\\u", "\\ud800", "\\udc00", "null",
                                                         "true", "1e400", "-0", "é", "\x00"]


def mutations(rng: random.Random, n: int):
    """Random edits of the valid texts: characters replaced, inserted, deleted, truncated."""
    ops = sorted(VALID)
    for _ in range(n):
        op = rng.choice(ops)
        text = VALID[op]
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text) + 1)
            how = rng.randrange(4)
            if how == 0:
                text = text[:i] + rng.choice(ALPHABET) + text[i + 1:]
            elif how == 1:
                text = text[:i] + rng.choice(ALPHABET) + text[i:]
            elif how == 2:
                text = text[:i] + text[i + 1:]
            else:
                text = text[:i]
        yield op, text


def answer(op: str, text: str):
    """What the Python side says: None, "Malformed" or a CoordinatorError code."""
    try:
        args = loads(text)
    except MalformedJson:
        return "Malformed"
    try:
        decode_args(op, args)
    except CoordinatorError as e:
        return e.code
    return None


def cases() -> list:
    out, seen = [], set()
    sources = [("valid", VALID.items()), ("structure", STRUCTURE), ("slot", substituted()),
               ("mutation", mutations(random.Random(20261126), 400))]
    for kind, items in sources:
        for op, text in items:
            if (op, text) in seen:
                continue
            seen.add((op, text))
            out.append({"name": f"{kind}-{len(out)}", "op": op, "args": text,
                        "error": answer(op, text)})
    return out


def render() -> str:
    doc = {"description": __doc__.split("\n\n")[1].replace("\n", " "), "cases": cases()}
    lines = ",\n".join(" " + json.dumps(c) for c in doc["cases"])
    return ('{"description": ' + json.dumps(doc["description"]) + ',\n "cases": [\n' + lines
            + "\n ]\n}\n")


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {len(cases())} cases to {OUT}", file=sys.stderr)
