"""Contributor points in the core: crediting a settled slot at the run's rates (points.py), and
properties over random operation sequences: points are neither lost nor made up by settling."""

from dataclasses import replace

import pytest
from hypothesis import given, settings

from psyche_coordinator_core import (
    ClientState,
    CoordinatorError,
    Credit,
    Points,
    RunConfig,
    RunState,
    apply,
    credit,
    pending_credit,
    ranked,
    with_unsettled,
)
from psyche_coordinator_core.points import U64
from tests.test_properties import CONFIGS, SETTINGS, make_op, new_run, op_sequences

ID = b"\x07" * 32
CFG = RunConfig(max_seq_len=64, tokens_per_compute_point=100, presence_points=3)


def test_credit_adds_counts_and_points_at_the_rates():
    e = credit(None, Credit(ID, presence=4, sequences=5), CFG)
    assert (e.presence_rounds, e.sequences, e.tokens) == (4, 5, 320)
    assert (e.presence_points, e.compute_points, e.token_carry) == (12, 3, 20)
    e = credit(e, Credit(ID, presence=1, sequences=2), CFG)  # 20 carried + 128 tokens
    assert (e.tokens, e.compute_points, e.token_carry, e.total) == (448, 4, 48, 19)


def test_the_cap_takes_presence_first_and_counts_keep_growing():
    cfg = replace(CFG, points_cap=14)
    e = credit(None, Credit(ID, presence=3, sequences=12), cfg)  # 9 presence, 7 compute wanted
    assert (e.presence_points, e.compute_points, e.total) == (9, 5, 14)
    e = credit(e, Credit(ID, presence=10, sequences=100), cfg)
    assert e.total == 14 and e.presence_rounds == 13 and e.sequences == 112
    assert e.tokens == 112 * 64 and e.token_carry < 100
    full = credit(None, Credit(ID, presence=100, sequences=0), cfg)
    assert (full.presence_points, full.compute_points) == (14, 0)


def test_figures_saturate_instead_of_wrapping():
    cfg = replace(CFG, max_seq_len=1 << 32, presence_points=1 << 32 - 1,
                  tokens_per_compute_point=1)
    e = credit(Points(ID, tokens=U64 - 1, presence_points=U64 - 5),
               Credit(ID, presence=1 << 40, sequences=1 << 40), cfg)
    assert e.tokens == U64 and e.presence_points == U64 and e.total == U64


def test_a_credit_for_another_identity_is_refused():
    with pytest.raises(CoordinatorError) as e:
        credit(Points(ID), Credit(b"\x08" * 32, 1, 1), CFG)
    assert e.value.code == "InvalidOperation"


def test_ranked_orders_by_total_and_ties_share_a_rank():
    a, b, c = (bytes([n]) * 32 for n in (1, 2, 3))
    ledger = {a: Points(a, presence_points=5), b: Points(b, compute_points=9),
              c: Points(c, presence_points=4, compute_points=1)}
    assert [(r, p.identity) for r, p in ranked(ledger)] == [(1, b), (2, a), (2, c)]


def test_flops_are_tokens_times_the_models_flops_per_token():
    assert Points(ID, tokens=1000).flops(replace(CFG, flops_per_token=6_600_000)) == 6_600_000_000


def _settled_and_held(ledger, s):
    """Per identity: (presence rounds, sequences) settled into the ledger plus held in slots."""
    out = {}
    for p in ledger.values():
        out[p.identity] = [p.presence_rounds, p.sequences]
    for c in s.clients:
        got = out.setdefault(c.identity, [0, 0])
        got[0] += c.presence
        got[1] += c.sequences
    return {k: tuple(v) for k, v in out.items() if v != [0, 0]}


@settings(max_examples=40, **SETTINGS)
@given(seq=op_sequences)
def test_settling_neither_loses_nor_makes_points(seq):
    """Over random operations: a round's end adds exactly one presence round per healthy client;
    a settle moves a slot's counters into the ledger unchanged; nothing else moves them, and an
    epoch never starts over unsettled slots."""
    config_index, ops = seq
    s = new_run("property-run", CONFIGS[config_index], 0x5EED + config_index)
    now, ledger = 1_000, {}
    for kind, a, b, dt in ops:
        now += dt
        when, op, args = make_op(s, now, kind, a, b)
        now = when
        before = _totals(_settled_and_held(ledger, s))
        try:
            nxt = apply(s, now, op, **args)
        except CoordinatorError:
            continue
        if op == "settle":
            moved = pending_credit(s, args["index"])
            ledger[moved.identity] = credit(ledger.get(moved.identity), moved, s.config)
        if s.run_state == RunState.WaitingForMembers and nxt.run_state == RunState.Warmup:
            assert not s.unsettled_count(), "an epoch started over unsettled slots"
        round_ended = s.run_state == RunState.RoundWitness and nxt.run_state != s.run_state
        healthy = sum(1 for c in s.clients if c.state == ClientState.Healthy)
        presence, sequences = _totals(_settled_and_held(ledger, nxt))
        assert presence - before[0] == (healthy if round_ended else 0), op
        assert sequences == before[1] or round_ended and sequences > before[1], op
        s = nxt
    live = with_unsettled(ledger, s)
    assert {k: (p.presence_rounds, p.sequences) for k, p in live.items()
            if p.presence_rounds or p.sequences} == _settled_and_held(ledger, s)


def _totals(held: dict) -> tuple:
    return (sum(v[0] for v in held.values()), sum(v[1] for v in held.values()))
