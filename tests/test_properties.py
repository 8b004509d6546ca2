"""Property tests of the coordinator core (hypothesis, bounded).

(a) assign_batches partitions a round's batch exactly; (b) step and epoch never go back;
(c) a rejected operation leaves the state (and its canonical bytes) unchanged; (d) the same inputs
give the same hashes; (e) canonical bytes round-trip; (f) an election draws distinct participants;
(g) the committee elects exactly expected_witnesses witnesses; (h) tick_deadline tells exactly
when a tick starts to matter."""

import hashlib
import random
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psyche_coordinator_core import (
    ClientState,
    CoordinatorError,
    Round,
    RoundCommittee,
    RunConfig,
    RunState,
    apply,
    assign_batches,
    assign_verifications,
    expected_witnesses,
    from_bytes,
    new_run,
    round_batch_size,
    tick_deadline,
    to_bytes,
    verification_sample,
)
from psyche_coordinator_core.bloom import EMPTY_BLOOM, bloom_of
from psyche_coordinator_core.committee import checkpointer_count, verifier_count
from psyche_coordinator_core.constants import VERIFY_SAMPLE
from psyche_coordinator_core.shuffle import draw_first

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def key(kind: str, label: int) -> bytes:
    return hashlib.sha256(f"psyche-property/{kind}/{label}".encode()).digest()


# ====================================================================== (a) data assignment

def participants_mask(n: int, rng: random.Random) -> int:
    mask = 0
    for i in rng.sample(range(256), n):
        mask |= 1 << i
    return mask


@settings(max_examples=100, **SETTINGS)
@given(n=st.integers(1, 256), pick=st.integers(0, 2**32), seed=st.integers(0, 2**64 - 1),
       vp=st.integers(0, 50), start=st.integers(1, 2048), extra=st.integers(0, 2048),
       ramp=st.sampled_from([0, 0, 1000, 10**6, 1 << 44]), data_index=st.integers(0, 10**9),
       seq=st.integers(1, 4096), vs=st.sampled_from([0, 0, 1, 2, 3, 5, 8, 255]))
def test_assign_batches_partitions_the_batch(n, pick, seed, vp, start, extra, ramp, data_index,
                                             seq, vs):
    cfg = RunConfig(global_batch_size_start=start, global_batch_size_end=min(start + extra, 65535),
                    global_batch_size_warmup_tokens=ramp, max_seq_len=seq,
                    verification_percent=vp, verify_sample=vs).validate()
    rnd = Round(height=3, data_index=data_index, random_seed=seed,
                participants=participants_mask(n, random.Random(pick)))
    cm = RoundCommittee(rnd, cfg.witness_nodes, vp)
    trainers, verifiers = cm.trainers(), cm.verifier_indices()
    assert sorted(trainers + verifiers) == rnd.participant_indices()
    assert len(verifiers) == verifier_count(n, vp) and trainers

    total = round_batch_size(cfg, rnd)
    assert start <= total <= cfg.global_batch_size_end
    batches = assign_batches(cfg, rnd)
    assert set(batches) <= set(trainers)
    if total >= len(trainers):
        assert set(batches) == set(trainers)  # nobody idle
    ranges = sorted(batches.values())
    assert ranges[0].start == data_index
    for a, b in zip(ranges, ranges[1:]):
        assert a.end + 1 == b.start  # contiguous and disjoint
    assert ranges[-1].end == data_index + total - 1
    assert sum(len(r) for r in ranges) == total
    sizes = {len(r) for r in ranges}
    assert max(sizes) - min(sizes) <= 1

    checks = assign_verifications(cfg, rnd)
    assert set(checks) == set(verifiers)
    assert all(b in ranges for b in checks.values())

    # the verifiers' samples: min(s, trainers with a batch) distinct trainers with a batch each,
    # the first the one assign_verifications names, and every such trainer judged by
    # floor(total / n) or one more verifiers (the samples lie end to end around the order)
    s = vs or VERIFY_SAMPLE
    samples = {v: verification_sample(cfg, rnd, v, cm) for v in verifiers}
    for t in samples.values():
        assert len(t) == len(set(t)) == min(s, len(batches)) and set(t) <= set(batches)
    assert all(batches[t[0]] == checks[v] for v, t in samples.items())
    judged = Counter(x for t in samples.values() for x in t)
    if verifiers:
        total = len(verifiers) * min(s, len(batches))
        low = total // len(batches)
        assert all(low <= judged[b] <= low + (total % len(batches) > 0) for b in batches)
    assert verification_sample(cfg, rnd, trainers[0], cm) == []


# ====================================================================== (f) draws

@settings(max_examples=80, **SETTINGS)
@given(seed=st.binary(min_size=32, max_size=32), n=st.integers(1, 256), cut=st.integers(0, 256))
def test_draw_first_draws_distinct_participants(seed, n, cut):
    whole = draw_first(seed, n, n)
    assert sorted(whole) == list(range(n))
    count = min(cut, n)
    # fewer draws are the start of the same shuffle: electing c never depends on how many more
    # a caller might have drawn
    assert draw_first(seed, n, count) == whole[:count]


# ====================================================================== (g) committee

@settings(max_examples=100, **SETTINGS)
@given(n=st.integers(1, 256), pick=st.integers(0, 2**32), seed=st.integers(0, 2**64 - 1),
       witness_nodes=st.integers(0, 32), vp=st.integers(0, 50), cp=st.integers(0, 100))
def test_committee_elects_expected_witnesses(n, pick, seed, witness_nodes, vp, cp):
    rnd = Round(random_seed=seed, participants=participants_mask(n, random.Random(pick)))
    cm = RoundCommittee(rnd, witness_nodes, vp, cp)
    witnesses = cm.witness_indices()
    want = expected_witnesses(witness_nodes, n)
    assert want == min(witness_nodes or 32, n)
    assert len(witnesses) == want == cm.elected_witnesses
    assert set(witnesses) <= set(rnd.participant_indices())
    assert all(cm.is_witness(i) == (i in witnesses) for i in range(256))
    checkpointers = [i for i in rnd.participant_indices() if cm.is_checkpointer(i)]
    assert len(checkpointers) == (checkpointer_count(n, cp) or n)


# ====================================================================== (b)-(e) op sequences

CONFIGS = [
    RunConfig(warmup_time=2, cooldown_time=2, max_round_train_time=3, round_witness_time=1,
              epoch_time=14, total_steps=12, max_seq_len=8, min_clients=1, init_min_clients=2,
              global_batch_size_start=4, global_batch_size_end=8,
              global_batch_size_warmup_tokens=64, waiting_for_members_extra_time=1),
    RunConfig(warmup_time=1, cooldown_time=1, max_round_train_time=2, round_witness_time=1,
              epoch_time=9, total_steps=30, min_clients=2, init_min_clients=3, witness_nodes=2,
              global_batch_size_start=6, global_batch_size_end=6, verification_percent=25,
              checkpointer_percent=50, waiting_for_members_extra_time=1, checkpoint_interval=4),
    RunConfig(warmup_time=0, cooldown_time=1, max_round_train_time=1, round_witness_time=1,
              epoch_time=6, total_steps=5, min_clients=1, init_min_clients=1, witness_nodes=1,
              global_batch_size_start=8, global_batch_size_end=8,
              waiting_for_members_extra_time=1),
]
LABELS = 6
KINDS = ["advance"] * 6 + ["tick", "join", "withdraw", "warmup_witness", "witness", "witness_bad",
                           "health_check", "checkpoint", "pause", "resume", "update", "settle"]


def _blooms(s, missing):
    prev = s.round_back(1)
    if prev is None or not s.round_trains(prev):
        return EMPTY_BLOOM, EMPTY_BLOOM  # round 0 vouches for nothing
    batches = assign_batches(s.config, prev)
    signers = [s.clients[i].signer.hex() for i in sorted(batches) if i not in missing]
    return bloom_of(signers), bloom_of(hashlib.sha256(x.encode()).hexdigest() for x in signers)


def _params(step: int, forked: bool = False) -> bytes:
    return hashlib.sha256(b"params/%d/%d" % (step, forked)).digest()


def _witness_args(s, index, signer, missing=(), step=None, forked=False):
    pb, bb = _blooms(s, set(missing))
    return dict(signer=signer, index=index, step=s.step if step is None else step,
                participant_bloom=pb, broadcast_bloom=bb, broadcast_merkle=bytes(32),
                param_hash=_params(s.step, forked))


def _advance(s, now):
    """The natural next operation in the current phase: (time, op, args)."""
    cfg, st = s.config, s.run_state
    if st in (RunState.Uninitialized, RunState.Paused):
        return now, "resume", {}
    if st == RunState.WaitingForMembers:
        for i, c in enumerate(s.clients):
            if c.unsettled:  # the new epoch waits for the slots' points to be settled
                return now, "settle", dict(index=i)
        if len(s.pending) < cfg.init_min_clients:
            for label in range(LABELS):
                if s.pending_index(key("signer", label)) is None:
                    return now, "join", dict(signer=key("signer", label),
                                             p2p_identity=key("p2p", label))
        return max(now, s.run_state_start + cfg.waiting_for_members_extra_time), "tick", {}
    if st == RunState.Warmup:
        done = {w.index for w in s.current_round.witnesses}
        for i, c in enumerate(s.clients):
            if c.state == ClientState.Healthy and i not in done:
                return now, "warmup_witness", dict(signer=c.signer, index=i)
        return max(now, s.run_state_start + cfg.warmup_time + 1), "tick", {}
    if st == RunState.RoundTrain:
        done = {w.index for w in s.current_round.witnesses}
        for i in RoundCommittee(s.current_round, cfg.witness_nodes, 0).witness_indices():
            if s.clients[i].state == ClientState.Healthy and i not in done:
                return now, "witness", _witness_args(s, i, s.clients[i].signer)
        return max(now, s.run_state_start + cfg.max_round_train_time), "tick", {}
    if st == RunState.RoundWitness:
        return max(now, s.run_state_start + cfg.round_witness_time), "tick", {}
    if st == RunState.Cooldown:
        return max(now, s.run_state_start + cfg.cooldown_time), "tick", {}
    return now, "tick", {}  # Finished: refused


def make_op(s, now, kind, a, b):
    """Turn drawn numbers into one operation on state `s` at time `now`."""
    sig = key("signer", a)
    idx = s.client_index(sig)
    idx = b if idx is None else idx
    if kind == "advance":
        return _advance(s, now)
    if kind == "join":
        return now, "join", dict(signer=sig, p2p_identity=key("p2p", a))
    if kind == "withdraw":
        return now, "withdraw", dict(signer=sig)
    if kind == "warmup_witness":
        return now, "warmup_witness", dict(signer=sig, index=idx)
    if kind == "witness":
        return now, "witness", _witness_args(s, idx, sig, missing={b}, forked=b == 3)
    if kind == "witness_bad":
        step = s.step + (b % 3) - 1  # wrong step two times in three
        args = _witness_args(s, idx, sig, step=step)
        if b == 5:
            args["participant_bloom"] = args["participant_bloom"][:-1] + b"\x80"
        return now, "witness", args
    if kind == "health_check":
        target = s.client_index(key("signer", b))
        return now, "health_check", dict(signer=sig, index=idx,
                                         targets=[b if target is None else target])
    if kind == "checkpoint":
        # the agreed pair, the snapshot point's, or a forked hash (refused)
        step, h = [(s.param_step, s.param_hash), (s.due_step, s.due_hash),
                   (s.param_step, _params(s.param_step, True))][b % 3]
        return now, "checkpoint", dict(signer=sig, index=idx, repo=f"org/m{b}", revision="",
                                       step=step, param_hash=h)
    if kind == "settle":
        return now, "settle", dict(index=idx)
    if kind == "update":
        return now, "update", dict(config=CONFIGS[b % len(CONFIGS)])
    return now, kind, {}  # tick, pause, resume


op_sequences = st.tuples(
    st.integers(0, len(CONFIGS) - 1),
    st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, LABELS - 1),
                       st.integers(0, LABELS - 1), st.integers(0, 3)),
             min_size=30, max_size=120),
)


def run_sequence(config_index, ops, on_step=None):
    """Apply the sequence; returns [(error code or None, canonical bytes)] per step."""
    s = new_run("property-run", CONFIGS[config_index], 0x5EED + config_index)
    now, trace = 1_000, []
    for kind, a, b, dt in ops:
        now += dt
        when, op, args = make_op(s, now, kind, a, b)
        now = when
        before = to_bytes(s)
        try:
            nxt, err = apply(s, now, op, **args), None
        except CoordinatorError as e:
            nxt, err = s, e.code
        after = to_bytes(nxt)
        if on_step:
            on_step(s, before, nxt, after, err, op)
        trace.append((err, after))
        s = nxt
    return s, trace


@settings(max_examples=80, **SETTINGS)
@given(seq=op_sequences)
def test_step_and_epoch_never_go_back(seq):
    def check(s, before, nxt, after, err, op):
        assert nxt.step >= s.step and nxt.epoch >= s.epoch
        assert nxt.step <= nxt.config.total_steps + 3 or nxt.config != s.config
        assert nxt.healthy_count() <= len(nxt.clients) <= 256 and len(nxt.pending) <= 256
        if nxt.run_state in (RunState.RoundTrain, RunState.RoundWitness):
            assert nxt.current_round.participants
            assert len(nxt.current_round.witnesses) <= 32
    run_sequence(*seq, on_step=check)


@settings(max_examples=80, **SETTINGS)
@given(seq=op_sequences)
def test_rejected_op_leaves_state_unchanged(seq):
    def check(s, before, nxt, after, err, op):
        assert to_bytes(s) == before  # the input is never mutated, accepted or not
        if err is not None:
            assert nxt is s and after == before
    run_sequence(*seq, on_step=check)


@settings(max_examples=50, **SETTINGS)
@given(seq=op_sequences)
def test_same_inputs_same_hashes(seq):
    first = [(e, hashlib.sha256(b).hexdigest()) for e, b in run_sequence(*seq)[1]]
    second = [(e, hashlib.sha256(b).hexdigest()) for e, b in run_sequence(*seq)[1]]
    assert first == second


@settings(max_examples=50, **SETTINGS)
@given(seq=op_sequences)
def test_canonical_bytes_round_trip(seq):
    def check(s, before, nxt, after, err, op):
        if err is None:
            decoded = from_bytes(after)
            assert to_bytes(decoded) == after
            assert decoded.run_state == nxt.run_state and decoded.clients == nxt.clients
            assert [r.witnesses for r in decoded.rounds] == [r.witnesses for r in nxt.rounds]
    run_sequence(*seq, on_step=check)


@settings(max_examples=40, **SETTINGS)
@given(seq=op_sequences)
def test_tick_deadline_is_exact(seq):
    """At tick_deadline a tick changes the state; a second earlier (not before the phase began)
    it does not; with no deadline a tick never changes it."""
    def tick(s, now):
        try:
            return to_bytes(apply(s, now, "tick"))
        except CoordinatorError:
            return None

    def check(s, before, nxt, after, err, op):
        if err is not None or nxt.run_state.halted:
            return
        d = tick_deadline(nxt)
        if d is None:
            assert tick(nxt, nxt.run_state_start + 10**6) == after
            return
        assert d >= nxt.run_state_start
        assert tick(nxt, d) != after
        if d - 1 >= nxt.run_state_start:
            assert tick(nxt, d - 1) == after
    run_sequence(*seq, on_step=check)


def test_sequences_reach_every_phase():
    """The op generator is strong enough to reach the interesting states (guards the properties
    above against vacuously passing)."""
    rng = random.Random(7)
    seen = set()
    for config_index in range(len(CONFIGS)):
        for _ in range(12):
            ops = [(rng.choice(KINDS), rng.randrange(LABELS), rng.randrange(LABELS),
                    rng.randrange(4)) for _ in range(150)]
            _, trace = run_sequence(config_index, ops,
                                    on_step=lambda s, b, n, a, e, op: seen.add(n.run_state))
    assert set(RunState) - {RunState.Uninitialized} <= seen, set(RunState) - seen
