"""The trainer's lookahead (Psyche's error_correction): a client trains on the consensus
parameters plus its own update still in flight, and only then; the parameters it applies to and
hashes are the consensus's, bit for bit."""

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from psyche_client.client.results import TrainingResult  # noqa: E402
from psyche_client.data.token_files import write_tokens  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.training.model import parameter_hash  # noqa: E402
from psyche_client.training.spec import RunSpec  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402
from psyche_coordinator_core import BatchId, Checkpoint, CheckpointKind  # noqa: E402

MODEL = dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
             intermediate_size=128, max_seq_len=32)


def trainer(tmp_path, lookahead):
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_tokens(tmp_path / "train.bin", [(i * 7) % 256 for i in range(4096)], 2)
    spec = RunSpec.from_dict({"model": MODEL, "data": {"kind": "local", "dir": str(tmp_path)},
                              "optimizer": {"lookahead": lookahead, "warmup_steps": 0}})
    t = DistroTrainer(spec, "run", Identity(bytes(32)))
    t.prepare(0, SimpleNamespace(checkpoint=Checkpoint(CheckpointKind.Dummy, ""), step=1,
                                 run_seed=3))
    return t


def train(t, step):
    payload = t.train(step, BatchId(0, 3), None)
    return payload, parameter_hash(t.model)


def test_lookahead_trains_on_the_in_flight_update_and_leaves_the_consensus(tmp_path):
    plain, ahead = trainer(tmp_path / "a", False), trainer(tmp_path / "b", True)
    start = parameter_hash(plain.model)
    assert parameter_hash(ahead.model) == start
    # step 1: nothing in flight yet, so both train on the same parameters
    p1, h1 = train(plain, 1)
    q1, g1 = train(ahead, 1)
    assert p1 == q1 and h1 == g1 == start  # training alone never moves the parameters
    # step 2: step 1's update is still in flight (applied while step 3 trains)
    p2, h2 = train(plain, 2)
    q2, g2 = train(ahead, 2)
    assert h2 == g2 == start  # the lookahead was taken back exactly
    assert p2 != q2  # but the gradients came from the looked-ahead parameters
    # both apply step 1's consensus: the same parameters again, bit for bit
    result = TrainingResult.create(plain.identity, 1, BatchId(0, 3), p1)
    plain.apply(1, [result])
    ahead.apply(1, [result])
    assert parameter_hash(plain.model) == parameter_hash(ahead.model) != start


def test_no_lookahead_for_an_applied_or_untrained_step(tmp_path):
    t = trainer(tmp_path, True)
    p1, _ = train(t, 1)
    t.apply(1, [TrainingResult.create(t.identity, 1, BatchId(0, 3), p1)])
    looked = []
    real = t.optimizer.apply_lookahead
    t.optimizer.apply_lookahead = lambda lr: (looked.append(lr), real(lr))
    train(t, 2)  # step 1 is applied already: nothing in flight
    train(t, 4)  # step 3 was not trained by this client: nothing of its own in flight
    assert looked == []
    train(t, 5)  # step 4 is in flight
    assert len(looked) == 1


def test_a_verifier_stands_where_the_trainer_trained(tmp_path):
    """The lookahead steps by the sign of the update as it was sent, so a verifier that decodes
    the trainer's previous result reaches the trainer's training parameters bit for bit (its
    test of the next result then sees the gradient the trainer saw)."""
    ahead, verifier = trainer(tmp_path / "a", True), trainer(tmp_path / "b", True)
    p1, start = train(ahead, 1)
    ahead.optimizer.apply_lookahead(ahead._lr(1))  # where ahead trains step 2 (see above)
    there = parameter_hash(ahead.model)
    ahead.optimizer.remove_lookahead()
    previous = TrainingResult.create(ahead.identity, 1, BatchId(0, 3), p1)
    assert verifier._lookahead_of(2, previous)
    assert parameter_hash(verifier.model) == there != start
    verifier.optimizer.remove_lookahead()
    assert parameter_hash(verifier.model) == start
    # nothing to stand on: no result of the step before, or one that does not decode
    garbage = TrainingResult.create(ahead.identity, 1, BatchId(0, 3), b"x" * 20)
    assert not verifier._lookahead_of(2, None) and not verifier._lookahead_of(2, garbage)
    assert parameter_hash(verifier.model) == start


def test_the_trainer_clips_gradients_as_the_spec_says(tmp_path):
    assert trainer(tmp_path, True).optimizer.max_grad_norm == 5.0  # optimizer.grad_clip
