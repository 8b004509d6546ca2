"""Replay the conformance vectors (tests/vectors/*.json) against the Python core.

The Rust program replays the same files; see tests/vectors/README.md for the format. Also checks
that the checked-in vectors are exactly what the generator produces today, so a change in the core
(or in the generator) that alters any hash fails here until the vectors are regenerated with
`python -m tests.vectors.generate`."""

import json
from pathlib import Path

import pytest

from psyche_coordinator_core import (
    CoordinatorError,
    RunConfig,
    apply,
    credit,
    new_run,
    pending_credit,
    state_hash,
    to_bytes,
)
from psyche_coordinator_core.ops_json import checkpoint_from_json, decode_args
from tests.vectors import generate
from tests.vectors.generate import expectation, points_to_json

VECTORS = Path(__file__).resolve().parent / "vectors"
FILES = sorted(VECTORS.glob("*.json"))
EXPECT_KEYS = {"error", "hash", "run_state", "epoch", "step", "clients", "pending",
               "round_height", "witnesses", "healthy"}


def initial_state(initial: dict):
    state = new_run(initial["run_id"], RunConfig.from_dict(initial["config"]),
                    initial["run_seed"], checkpoint_from_json(initial["checkpoint"]))
    # an account another version of the code made: only that number differs
    state.layout_version = initial.get("layout_version", state.layout_version)
    return state


def replay(doc: dict) -> None:
    assert set(doc) == {"name", "description", "initial", "initial_hash", "steps"}
    state = initial_state(doc["initial"])
    assert state_hash(state) == doc["initial_hash"], "initial state"
    prev_hash = doc["initial_hash"]
    ledger = {}  # identity -> Points, credited by each accepted settle
    for n, step in enumerate(doc["steps"]):
        where = f"{doc['name']} step {n} ({step['op']} at {step['time']})"
        assert set(step) == {"time", "op", "args", "expect"}, where
        expect = dict(step["expect"])
        settled = step["op"] == "settle" and expect["error"] is None
        # an accepted settle also records the backend's half: what moved, and the entry after
        points = {k: expect.pop(k) for k in ("credited", "entry")} if settled else {}
        assert set(expect) == EXPECT_KEYS, where
        before = to_bytes(state)
        try:
            nxt = apply(state, step["time"], step["op"], **decode_args(step["op"], step["args"]))
            error = None
        except CoordinatorError as e:
            nxt, error = state, e.code
        # apply never mutates the state it is given, accepted or not
        assert to_bytes(state) == before, f"{where}: input state mutated"
        assert error == expect["error"], f"{where}: error {error!r}, expected {expect['error']!r}"
        got = expectation(nxt, error)
        assert got == expect, f"{where}: {got} != {expect}"
        if error is not None:
            assert expect["hash"] == prev_hash, f"{where}: rejected op changed the hash"
        if settled:
            moved = pending_credit(state, step["args"]["index"])
            entry = credit(ledger.get(moved.identity), moved, state.config)
            ledger[moved.identity] = entry
            got = {"credited": {"identity": moved.identity.hex(), "presence": moved.presence,
                                "sequences": moved.sequences},
                   "entry": points_to_json(entry)}
            assert got == points, f"{where}: {got} != {points}"
        state, prev_hash = nxt, expect["hash"]


def test_enough_vectors():
    assert len(FILES) >= 40, f"only {len(FILES)} vector files"
    total = sum(p.stat().st_size for p in FILES)
    assert total < 15_000_000, f"vectors take {total} bytes"


def test_vectors_cover_every_reachable_error():
    seen = set()
    for p in FILES:
        for step in json.loads(p.read_text())["steps"]:
            seen.add(step["expect"]["error"])
    # WitnessesFull cannot be reached (at most 32 elected witnesses, warmup ends at 32) and
    # InvalidRunId only comes from new_run.
    wanted = set(CoordinatorError.CODES) - {"WitnessesFull", "InvalidRunId"} | {None}
    assert wanted <= seen, f"no vector for {sorted(c for c in wanted - seen if c)}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_vector(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["name"] == path.stem
    replay(doc)


def test_generator_reproduces_vectors(tmp_path):

    generate.write_all(tmp_path)
    fresh = sorted(p.name for p in tmp_path.glob("*.json"))
    assert fresh == [p.name for p in FILES], "vector files differ from what the generator makes"
    stale = [name for name in fresh
             if (tmp_path / name).read_bytes() != (VECTORS / name).read_bytes()]
    assert not stale, (f"stale vectors (run `python -m tests.vectors.generate`): "
                       f"{', '.join(stale)}")
