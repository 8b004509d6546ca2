"""A witness's check of a peer's result against the run's model (training/validation.py), and an
apply that no payload can make fail: with real DisTrO results of a small Llama."""

import struct
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from psyche_client.client import results  # noqa: E402
from psyche_client.client.copies import NEAR_COPY, overlap  # noqa: E402
from psyche_client.client.daemon import ClientDaemon  # noqa: E402
from psyche_client.client.results import TrainingResult  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.p2p.transport import WebSocketTransport  # noqa: E402
from psyche_client.training.distro import SparseParam  # noqa: E402
from psyche_client.training.payload import (  # noqa: E402
    _HEADER,
    MAGIC,
    decode_payload,
    encode_payload,
)
from psyche_client.training.spec import RunSpec  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402
from psyche_client.training.validation import (  # noqa: E402
    check_payload,
    fingerprint,
    max_payload_bytes,
)
from psyche_coordinator_core import BatchId, Checkpoint, CheckpointKind  # noqa: E402

MODEL = dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
             intermediate_size=128, max_seq_len=64)


def make_trainers(data_dir, n, **optimizer):
    spec = RunSpec.from_dict({
        "model": MODEL, "optimizer": dict(chunk=32, topk=16, warmup_steps=1, **optimizer),
        "data": {"kind": "local", "dir": str(data_dir / "train"), "token_size": 2}})
    state = SimpleNamespace(checkpoint=Checkpoint(CheckpointKind.Dummy), step=1, run_seed=5,
                            config=None)
    out = []
    for k in range(n):
        t = DistroTrainer(spec, "run", Identity.generate(), log=lambda *_: None)
        t.prepare(0, state)
        out.append(t)
    return out, state


def test_a_client_refuses_results_over_its_models_bound_unhashed(monkeypatch):
    """Once the daemon has its trainer, its state machine and its transport take the bound the
    validation applies: a result one byte over it is refused on receipt, never hashed."""
    spec = RunSpec.from_dict({"model": MODEL, "optimizer": dict(chunk=32, topk=16),
                              "data": {"kind": "local", "dir": "/nonexistent"}})
    ident = Identity.generate()
    transport = WebSocketTransport(ident, None)
    daemon = ClientDaemon(ident, None, transport, None)
    trainer = DistroTrainer(spec, "run", ident, log=lambda *_: None)
    daemon._use_trainer(trainer)
    bound = max_payload_bytes(trainer.layout)
    assert bound < results.MAX_RESULT_BYTES
    assert daemon.sm.max_payload == transport.max_result_bytes == bound
    over = TrainingResult.create(Identity.generate(), 3, BatchId(0, 3), bytes(bound + 1))

    def no_hashing(*args):
        raise AssertionError("a payload received was hashed")

    monkeypatch.setattr(results, "commitment_of", no_hashing)
    transport.on_result(over)  # as the transport delivers a result it received
    assert daemon.sm.rejected == {over.trainer.hex(): 1}


def train(trainers, state, step):
    results = []
    for k, t in enumerate(trainers):
        batch = BatchId(4 * k, 4 * k + 3)
        payload = t.train(step, batch, state)
        results.append(TrainingResult.create(t.identity, step, batch, payload))
    return results


@pytest.fixture(scope="module")
def trained(data_dir):
    trainers, state = make_trainers(data_dir, 3, quantize_1bit=False)
    return trainers, state, train(trainers, state, 1)


def test_the_spec_gives_the_optimizers_layout(trained):
    trainers, _, _ = trained
    assert trainers[0].layout == trainers[0].optimizer.layout()


def forged(trainer, payload, step=1, batch=BatchId(0, 3)):
    return TrainingResult.create(trainer.identity, step, batch, payload)


def test_honest_results_pass_and_hostile_ones_are_refused_with_a_reason(trained):
    trainers, _, results = trained
    t = trainers[0]
    for r in results:
        assert t.validate(r)[0] == ""
    honest = results[1].payload
    params = decode_payload(honest)
    # the stall of the issue: 20 bytes of garbage, signed and committed
    assert "bad magic" in t.validate(forged(t, b"\x13" * 20))[0]
    # NaN in the values (bf16/fp32 bit patterns: the structure is right)
    nan = bytearray(honest)
    nan[-4:] = struct.pack("<f", float("nan"))
    assert "non-finite" in t.validate(forged(t, bytes(nan)))[0]
    # zeros: every value zero
    zeros = [SparseParam(p.shape, p.chunk, p.indices, torch.zeros_like(p.values)) for p in params]
    assert t.validate(forged(t, encode_payload(zeros)))[0] == "an all-zero update"
    # another model's shapes
    wrong = encode_payload(params[:-1])
    assert "parameters" in t.validate(forged(t, wrong))[0]
    # oversize: more bytes than any honest result for this model, refused before decoding
    big = honest + bytes(max_payload_bytes(t.layout))
    assert "exceeds" in t.validate(forged(t, big))[0]
    # a header that claims a huge count, truncated data, a bad version
    assert "out of range" in t.validate(forged(t, _HEADER.pack(MAGIC, 1, 0, 0, 1 << 30)))[0]
    assert "truncated" in t.validate(forged(t, honest[:len(honest) // 2]))[0]
    assert "version" in t.validate(forged(t, MAGIC + b"\x09" + honest[5:]))[0]


def test_copies_have_the_same_fingerprint_and_honest_results_do_not(trained):
    trainers, _, results = trained
    prints = [fingerprint(check_payload(r.payload, trainers[0].layout)) for r in results]
    assert prints[0].size > 0
    shared = max(overlap(a, b) for i, a in enumerate(prints) for b in prints[i + 1:])
    assert shared < NEAR_COPY / 4, shared  # different batches pick different indices
    # a copy with every value changed (sign-flipped) keeps its indices
    params = decode_payload(results[0].payload)
    flipped = [SparseParam(p.shape, p.chunk, p.indices, -p.values) for p in params]
    assert overlap(fingerprint(flipped), prints[0]) == 1.0


def test_apply_leaves_out_what_does_not_decode_and_every_client_ends_the_same(data_dir):
    """Two honest results and one of garbage bytes: the apply of every client takes the two
    and ends with the parameters of applying the two alone (before, apply raised 'not a DisTrO
    payload (bad magic)' on every client and nothing of the round was applied)."""
    trainers, state = make_trainers(data_dir, 3)
    results = train(trainers, state, 1)[:2]
    garbage = forged(trainers[2], b"\x00" * 20, batch=BatchId(8, 11))
    hashes = [t.apply(1, results + [garbage]) for t in trainers[:2]]
    alone = trainers[2].apply(1, results)
    assert hashes == [alone, alone]


@pytest.mark.slow
@pytest.mark.heavy
def test_the_verifiers_test_tells_honest_updates_from_flipped_and_noise(data_dir):
    """A verifier scores each result on its own batch (judge.py: the sent signs against the
    batch gradient's, and the first-order gain of its step), at the parameters its trainer
    trained at (the consensus, and its previous result's lookahead): honest results are aimed
    at their batch; sign-flipped ones point up it, noise nowhere in particular
    (measured on 5 steps of 3 trainers, each step applied one round late as in a run: honest 0
    of 15 judged bad, flipped 15 of 15, noise 15 of 15 with the overlap test (the trainer's
    previous result as `last`), 14 of 15 by the two scores alone; the old loss-change test caught 14
    flipped and 4 noise). A bad verdict leaves the result out of every client's apply and counts
    towards its trainer's eviction, so an honest verdict must never be bad."""
    trainers, state = make_trainers(data_dir, 4, quantize_1bit=False)
    verifier = trainers[3]
    verdicts = {"honest": [], "flipped": [], "noise": []}
    gen = torch.Generator().manual_seed(7)
    previous = [None] * 3
    for step in range(1, 6):
        results = train(trainers[:3], state, step)  # at the lookahead of step - 1, in flight
        for k, r in enumerate(results):
            compare = results[(k + 1) % 3].batch
            params = decode_payload(r.payload)
            flipped = [SparseParam(p.shape, p.chunk, p.indices, -p.values) for p in params]
            noise = [SparseParam(p.shape, p.chunk, p.indices,
                                 torch.randn(p.values.shape, generator=gen).to(p.values.dtype)
                                 * p.values.float().std().to(p.values.dtype))
                     for p in params]
            for name, payload in (("honest", r.payload), ("flipped", encode_payload(flipped)),
                                  ("noise", encode_payload(noise))):
                bad, _ = verifier.verify(step, forged(trainers[k], payload, step, r.batch),
                                         compare, previous[k], previous[k])
                verdicts[name].append(bad)
        if step > 1:
            for t in trainers:
                t.apply(step - 1, previous)
        previous = results
    print({k: f"{sum(v)} of {len(v)} judged bad" for k, v in verdicts.items()})
    assert not any(verdicts["honest"]), verdicts
    assert all(verdicts["flipped"]), verdicts
    assert sum(verdicts["noise"]) >= 0.8 * len(verdicts["noise"]), verdicts
