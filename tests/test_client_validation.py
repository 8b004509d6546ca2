"""Validation before vouching, with the client state machine against the real core (the Sim of
test_client_state_machine): a result that fails its check, or copies another one, is never
vouched for, never applied, and its trainer is removed by the health checks; the honest
results of every round are applied by every client."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np

from psyche_client.client import results
from psyche_client.client.actions import Log, Validate
from psyche_client.client.copies import DIGEST_ROUNDS, NEAR_COPY, SeenPayloads, overlap
from psyche_client.client.results import MAX_RESULT_BYTES, TrainingResult, dummy_payload
from psyche_client.client.state_machine import ClientStateMachine
from psyche_client.client.verifying import Verifying
from psyche_client.identity import Identity
from psyche_coordinator_core import BatchId, ClientState, RunState

from .test_client_state_machine import CONFIG, OVERSIZE, Sim

LONG = replace(CONFIG, epoch_time=40, total_steps=12)


def honest_applies(sim, bad):
    """{step: set of commitments} each honest client applied; asserts they all agree."""
    per_client = {}
    for who, step, commitments in sim.applies:
        if who not in bad:
            per_client.setdefault(step, {})[who] = frozenset(commitments)
    for step, sets in per_client.items():
        assert len(set(sets.values())) == 1, (step, sets)
    return {step: next(iter(sets.values())) for step, sets in per_client.items()}


def test_a_malformed_result_is_never_applied_and_its_trainer_is_removed():
    sim = Sim(5, config=LONG, garbage={4})
    bad = sim.ids[4].public
    sim.run(lambda s: s.run_state == RunState.Cooldown)
    st = sim.state
    # every honest client applied the same set each round, with no result of the bad trainer
    garbage = {r.commitment for r in sim.published if r.trainer == bad}
    honest = {r.commitment for r in sim.published if r.trainer != bad}
    applied = honest_applies(sim, {4})
    assert applied and not any(s & garbage for s in applied.values())
    assert set().union(*applied.values()) <= honest
    # each round that trained honest results applied them (none were held back by the bad one)
    trained = {r.step for r in sim.published if r.trainer != bad}
    assert {s for s in applied if applied[s]} >= {s for s in trained if s + 2 < st.step - 2}
    # its sender was reported by a health check and dropped; nobody else was
    assert st.clients[st.client_index(bad)].state == ClientState.Dropped
    assert all(c.state == ClientState.Healthy for c in st.clients if c.signer != bad)
    assert any(op == "health_check" and bad in [st.clients[t].signer for t in args["targets"]]
               for _, op, args in sim.sent_args)
    # and the honest clients said why they refused its results
    assert any("not the batch's simulated result" in text for who, text in sim.logs if who != 4)


def test_an_oversize_result_is_refused_unhashed_and_its_trainer_removed(monkeypatch):
    """A payload over the receivers' size bound is refused before anything hashes or decodes
    it: only its sender hashed it, to sign it. The outcome is that of any refused result: never
    vouched for, never applied, its trainer dropped by the health checks."""
    hashed = []
    commitment_of = results.commitment_of

    def counting(step, batch, payload):
        hashed.append(len(payload))
        return commitment_of(step, batch, payload)

    monkeypatch.setattr(results, "commitment_of", counting)
    sim = Sim(5, config=LONG, oversize={4})
    for sm in sim.sms:
        sm.max_payload = OVERSIZE - 1  # honest (simulated) payloads are 32 bytes
    bad = sim.ids[4].public
    sim.run(lambda s: s.run_state == RunState.Cooldown)
    st = sim.state
    sent = [r for r in sim.published if r.trainer == bad]
    assert sent and all(len(r.payload) == OVERSIZE for r in sent)
    assert hashed.count(OVERSIZE) == len(sent)  # each signed once; no receiver hashed one
    assert not any(s & {r.commitment for r in sent} for s in honest_applies(sim, {4}).values())
    assert any(f"over the limit of {OVERSIZE - 1}" in text for who, text in sim.logs if who != 4)
    assert not any("not the batch's simulated result" in text for _, text in sim.logs)  # no
    # Validate was asked for: nothing decoded it either
    assert st.clients[st.client_index(bad)].state == ClientState.Dropped
    assert all(c.state == ClientState.Healthy for c in st.clients if c.signer != bad)


def test_what_is_refused_on_receipt_is_not_hashed(monkeypatch):
    """The benchmark's `oversize` payload (one byte over the decoders' limit) is refused by a
    client that knows no model yet, and so are a result for a batch that is not its sender's
    and one for a batch already decided: none of them is hashed."""
    sim = Sim(4, config=LONG, silent={3})
    sim.run(lambda s: s.run_state == RunState.RoundTrain and s.current_round.height >= 1)
    st = sim.state
    sm = ClientStateMachine(b"o" * 32, b"o" * 32)
    sm.on_state(st, sim.t)
    step = st.step
    owner, batch = sorted(sm.assignments[step].items())[0]
    ident = next(i for i in sim.ids if i.public == st.clients[owner].signer)
    thief = next(i for i in sim.ids if i.public != ident.public)
    honest = TrainingResult.create(ident, step, batch, dummy_payload("sim", step, batch))
    stolen = TrainingResult.create(thief, step, batch, honest.payload)
    huge = replace(honest, payload=bytes(MAX_RESULT_BYTES + 1))  # calloc'd: costs no memory

    def no_hashing(*args):
        raise AssertionError("a payload received was hashed")

    monkeypatch.setattr(results, "commitment_of", no_hashing)
    acts = sm.on_result(huge)
    assert len(acts) == 1 and isinstance(acts[0], Log) and "over the limit" in acts[0].text
    assert "not the assigned trainer" in sm.on_result(stolen)[0].text
    monkeypatch.undo()
    # an over-size result is not held against its batch (nothing shows that its trainer
    # signed that payload): the trainer's own result still counts
    assert any(isinstance(a, Validate) for a in sm.on_result(honest))
    sm.validated(honest, "", None)
    assert sm.results[step][batch] == honest
    monkeypatch.setattr(results, "commitment_of", no_hashing)
    assert sm.on_result(honest) == []  # decided: the first result of a batch counts


def test_copies_and_replays_are_refused_and_the_original_kept():
    seen = SeenPayloads()
    alice, bob = b"a" * 32, b"b" * 32
    seen.add(7, b"original", None, alice)
    assert seen.copy_of(7, b"original", None).startswith("the payload of 61616161")
    assert "step 7" in seen.copy_of(8, b"original", None)  # last round's, sent again
    assert seen.copy_of(8, b"something new", None) == ""
    seen.forget(7 + DIGEST_ROUNDS - 1)
    assert "step 7" in seen.copy_of(7 + DIGEST_ROUNDS - 1, b"original", None)
    seen.forget(7 + DIGEST_ROUNDS)
    assert seen.copy_of(7 + DIGEST_ROUNDS, b"original", None) == ""  # too old to remember
    # near copies: the same indices in most sampled chunks, whatever the bytes
    fp = np.arange(100, dtype=np.uint64)
    near = fp.copy()
    near[:5] += np.uint64(1)
    seen.add(9, b"x", fp, bob)
    assert overlap(fp, near) == 0.95 >= NEAR_COPY
    assert seen.copy_of(9, b"y", near).startswith("nearly the indices of 62626262")
    far = fp + np.uint64(1)
    assert seen.copy_of(9, b"z", far) == ""


def test_a_copied_result_is_refused_by_the_state_machine():
    """A trainer that re-signs another trainer's payload for its own batch: the witnesses take
    the original (received first) and refuse the copy."""
    sim = Sim(4, config=LONG, silent={3})  # the round waits for client 3: a state to look at
    sim.run(lambda s: s.run_state == RunState.RoundTrain and s.current_round.height >= 1)
    st = sim.state
    sm = ClientStateMachine(b"o" * 32, b"o" * 32)  # an observer that saw none of the round
    sm.on_state(st, sim.t)
    step = st.step
    (a, batch_a), (b, batch_b) = sorted(sm.assignments[step].items())[:2]
    ids = {i.public: i for i in sim.ids}
    ia, ib = ids[st.clients[a].signer], ids[st.clients[b].signer]
    original = TrainingResult.create(ia, step, batch_a, dummy_payload("sim", step, batch_a))
    copy = TrainingResult.create(ib, step, batch_b, original.payload)
    for r in (original, copy):
        for act in sm.on_result(r):
            sm.validated(act.result, "", None)  # both pass the structural check
    assert sm.results[step][batch_a] == original
    assert batch_b not in sm.results.get(step, {})
    assert "a copy: the payload of" in sm.invalid[step][batch_b]
    # the copier delivered something: a witness does not wait for it before vouching
    assert sm._decided(step, batch_b)


def test_verifiers_report_a_harmful_trainer_and_a_quorum_of_them_evicts_it():
    """Results that pass validation but fail the loss-improvement test: the elected verifiers
    that judge them send evidence, and once `evidence_quorum` distinct verifiers did, the
    trainer is Evicted; no honest trainer is ever reported."""
    config = replace(LONG, verification_percent=25, evidence_quorum=2, init_min_clients=8,
                     epoch_time=200, total_steps=60)
    sim = Sim(8, config=config, harmful={7})
    bad = sim.ids[7].public
    sim.run(lambda s: s.client_index(bad) is not None
            and s.clients[s.client_index(bad)].state != ClientState.Healthy, limit=2000)
    st = sim.state
    assert st.clients[st.client_index(bad)].state == ClientState.Evicted
    assert all(c.state == ClientState.Healthy for c in st.clients if c.signer != bad)
    evidence = [(who, args) for who, op, args in sim.sent_args if op == "evidence"]
    assert len({who for who, _ in evidence}) >= 2
    assert all(st.clients[a["target"]].signer == bad for _, a in evidence)
    assert not [r for r in sim.rejected if r[1] == "evidence"]


def test_a_verifier_judges_each_result_where_its_trainer_trained():
    """A trainer that trained the step before trains at its lookahead (that result's update
    stepped in), so a verifier's Verify carries that result, and nothing when the trainer had
    no batch then (it verified, or joined since)."""
    config = replace(LONG, verification_percent=25, evidence_quorum=2, init_min_clients=8,
                     epoch_time=200, total_steps=12)
    sim = Sim(8, config=config)
    sim.run(lambda s: s.run_state == RunState.Finished, limit=2000)
    published = {(r.step, r.trainer): r for r in sim.published}
    assert sim.verifies
    for _, step, r, previous in sim.verifies:
        assert previous is published.get((step - 1, r.trainer)), (step, r.trainer.hex()[:8])
    with_previous = sum(v[3] is not None for v in sim.verifies)
    assert 0 < with_previous < len(sim.verifies)  # both: the election changes who trains


def test_a_verifier_waits_for_the_trainers_result_of_the_step_before():
    """(known, previous): known once the trainer's result of step - 1 is here or refused, or
    when it had no batch then; a result is not judged from parameters it was not trained at."""
    trainer, other = b"t" * 32, b"o" * 32
    st = SimpleNamespace(clients=[SimpleNamespace(signer=other), SimpleNamespace(signer=trainer)])
    result = SimpleNamespace(trainer=trainer)
    b0, b1 = BatchId(0, 3), BatchId(4, 7)
    prior = TrainingResult.create(Identity.generate(), 4, b1, b"x")
    assigned = {4: {0: b0, 1: b1}}

    def previous(assignments, results, invalid):
        return Verifying._previous(st, 5, result, assignments, results, invalid)

    assert previous(assigned, {4: {b1: prior}}, {}) == (True, prior)
    assert previous(assigned, {4: {b0: prior}}, {}) == (False, None)  # on its way
    assert previous(assigned, {}, {4: {b1: "a copy"}}) == (True, None)  # refused
    assert previous({4: {0: b0}}, {}, {}) == (True, None)  # no batch at step 4
    assert previous({}, {}, {}) == (True, None)  # the epoch's first round


def test_a_result_after_a_bad_one_is_judged_from_the_bare_parameters():
    """A trainer's result whose result of the step before was judged bad (by this verifier, or
    by one whose evidence put it in its round's accused mask) is judged without that result's
    lookahead: an adversary that trains honestly and corrupts what it publishes stood at its
    true update, and from the published one a flipped result could pass."""
    trainer, other = b"t" * 32, b"o" * 32
    rounds = [SimpleNamespace(accused=0) for _ in range(4)]
    st = SimpleNamespace(step=6, clients=[SimpleNamespace(signer=other),
                                          SimpleNamespace(signer=trainer)],
                         client_index=lambda k: {other: 0, trainer: 1}.get(k),
                         round_back=lambda k: rounds[k])
    v = Verifying(b"v" * 32)
    assert not v._was_bad(st, 5, trainer)
    rounds[1].accused = 1 << 1  # step 5 is one round back: a verifier accused the trainer
    assert v._was_bad(st, 5, trainer) and not v._was_bad(st, 5, other)
    rounds[1].accused = 0
    v.verdict(st, None, 5, SimpleNamespace(trainer=trainer), True, "sign score -3")
    assert v._was_bad(st, 5, trainer) and not v._was_bad(st, 4, trainer)
    v.forget(6)  # results of step 6 on are still judged: the verdict of step 5 is kept
    assert v._was_bad(st, 5, trainer)
    v.forget(7)
    assert not v._was_bad(st, 5, trainer)

