"""The operations' JSON is read alike by the Python core and the Rust core, edge cases included
(-0, 1e3, 2^64, 1e400, NaN, lone surrogates, NUL, wrong types, missing, extra and duplicate
keys, deep nesting): tests/fuzz/ops_json_edge_cases.json holds the cases and the Python
answers; the Rust core's `ops_json_edge_cases` test replays the same file. Here: the file is
what its generator makes today, the answers hold, and ops_json.loads never raises anything but
MalformedJson (hypothesis)."""

import json

from hypothesis import given
from hypothesis import strategies as st

from psyche_coordinator_core import CoordinatorError
from psyche_coordinator_core.ops_json import MAX_DEPTH, MalformedJson, decode_args, loads

from . import ops_json_edge_cases as gen
from .mutate import fuzz, json_values, mutated_text


def test_the_edge_case_file_is_what_the_generator_makes():
    assert gen.OUT.read_text() == gen.render(), (
        "stale: run `python -m tests.fuzz.ops_json_edge_cases` and rerun the Rust "
        "ops_json_edge_cases test")


def test_every_edge_case_gets_its_recorded_answer():
    cases = json.loads(gen.OUT.read_text())["cases"]
    assert len(cases) > 500
    answers = {c["error"] for c in cases}
    assert {None, "Malformed", "InvalidOperation", "InvalidConfig",
            "InvalidCheckpoint"} <= answers
    for c in cases:
        assert gen.answer(c["op"], c["args"]) == c["error"], c["name"]


def test_the_numbers_and_strings_serde_json_reads_otherwise():
    assert loads("-0") == 0 and isinstance(loads("-0"), float)  # a float in serde_json too
    assert loads("18446744073709551615") == (1 << 64) - 1
    assert isinstance(loads("18446744073709551616"), float)
    assert isinstance(loads("-9223372036854775809"), float)
    assert loads('"\\ud83d\\ude00"') == "\U0001f600"  # a pair is one character
    assert loads('{"a": 1, "a": 2}') == {"a": 2}  # the last duplicate wins, in both
    for text in ("NaN", "-Infinity", "1e400", "-1e400", "1" * 400, '"\\ud800"', '["\\udc00"]',
                 '{"\\ud800": 1}', "\ufeff{}", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
                 b"\xff", 5, None):
        try:
            loads(text)
        except MalformedJson:
            continue
        raise AssertionError(f"{text!r} accepted")
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)


def test_regression_deep_nesting_is_malformed_not_a_recursion_error():
    # found by the server fuzz test: json.loads raised RecursionError (not a ValueError), which
    # escaped the server's message handler and killed the connection without a named error
    try:
        loads("[" * 100_000)
    except MalformedJson as e:
        assert "nested deeper" in str(e)
    else:
        raise AssertionError("accepted")


def test_regression_lone_surrogates_in_a_dict_are_not_strings_for_the_decoder():
    args = {"signer": "ab" * 32, "index": 0, "repo": "\ud800", "step": 0,
            "param_hash": "00" * 32}
    try:
        decode_args("checkpoint", args)
    except CoordinatorError as e:
        assert e.code == "InvalidOperation"
    else:
        raise AssertionError("accepted")


@fuzz
@given(st.one_of(*[mutated_text(t) for t in gen.VALID.values()], st.text(max_size=200)))
def test_loads_only_raises_malformed_json(text):
    try:
        loads(text)
    except MalformedJson:
        pass


def _code(op, args):
    try:
        decode_args(op, args)
    except CoordinatorError as e:
        return e.code
    return None


@st.composite
def near_valid_args(draw):
    """An operation's valid arguments with one value replaced, a key dropped or one added."""
    op = draw(st.sampled_from(sorted(gen.VALID)))
    args = loads(gen.VALID[op])
    how = draw(st.sampled_from(["replace", "drop", "add", "any"]))
    if how == "any":
        return op, draw(json_values())
    if args and how in ("replace", "drop"):
        k = draw(st.sampled_from(sorted(args)))
        if how == "drop":
            del args[k]
        else:
            args[k] = draw(json_values())
    else:
        args[draw(st.sampled_from(["index", "config", "x", "signer", ""]))] = draw(json_values())
    return op, args


@fuzz
@given(near_valid_args())
def test_decode_args_only_raises_coordinator_errors(op_args):
    op, args = op_args
    code = _code(op, args)  # nothing but a CoordinatorError comes out
    # what loads reads back of the value's JSON (where numbers may become floats, as in
    # serde_json) gets the same answer as the value itself
    try:
        again = loads(json.dumps(args))
    except MalformedJson:
        return  # a lone surrogate: refused whole, as serde_json does
    assert _code(op, again) == code
