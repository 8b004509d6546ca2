"""Data parallelism inside one client (psyche_client/training/parallel.py) on the cpu: gloo, two
ranks (the test process and one spawned worker), the tiny Llama of the other training tests."""

import multiprocessing
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from psyche_client.client.results import TrainingResult  # noqa: E402
from psyche_client.data.token_files import write_tokens  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.training.distro import DistroOptimizer, PeerResult  # noqa: E402
from psyche_client.training.model import build_model, parameter_hash  # noqa: E402
from psyche_client.training.parallel import DataParallelGroup, forward_backward, share_bounds  # noqa: E402
from psyche_client.training.spec import ModelSpec, RunSpec  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402
from psyche_coordinator_core import BatchId, Checkpoint, CheckpointKind  # noqa: E402

pytestmark = pytest.mark.slow
SPEC = ModelSpec(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                 intermediate_size=128, max_seq_len=32)
SEED = 1234


def tokens(n, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (n, 32)))


def full_batch(model, batch, micro):
    """The single-process reference: gradient accumulation over the whole batch."""
    model.train()
    model.zero_grad(set_to_none=True)
    loss = forward_backward(model, batch, len(batch), micro) / len(batch)
    return loss, [p.grad.clone() for p in model.parameters()]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_share_bounds():
    assert share_bounds(8, 2) == [0, 4, 8]
    assert share_bounds(7, 2) == [0, 4, 7]
    assert share_bounds(1, 3) == [0, 1, 1, 1]
    assert share_bounds(10, 4) == [0, 3, 5, 8, 10]


def test_two_ranks_match_one_and_stay_identical():
    torch.manual_seed(0)
    reference = build_model(SPEC, SEED)
    model = build_model(SPEC, SEED)
    group = DataParallelGroup(SPEC, SEED, 2, "cpu", micro_batch_size=2)
    pids = group.pids
    try:
        assert group.replica_hashes() == [parameter_hash(model)]  # same seed, same weights

        # (1) the all-reduced gradient and the loss equal single-process accumulation, also with
        # uneven shares (7 = 4 + 3) and a rank with nothing to do (1 = 1 + 0)
        for n in (8, 7, 1):
            batch = tokens(n, seed=n)
            loss_1, grads_1 = full_batch(reference, batch, 2)
            model.zero_grad(set_to_none=True)
            loss_2 = group.train(model, batch) / n
            assert loss_2 == pytest.approx(loss_1, rel=1e-6)
            for p, g in zip(model.parameters(), grads_1):
                torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)

        # a worker that fails its share reports it, and the group keeps working
        bad = tokens(4, seed=9)
        bad[2:] = 10_000  # out of the vocabulary: only the worker's share (rows 2..3) fails
        model.zero_grad(set_to_none=True)
        with pytest.raises(RuntimeError, match="rank 1"):
            group.train(model, bad)
        # a failing rank 0 (alone, then with the worker) raises its own error; the worker's
        # report is drained, so the next commands below see clean pipes
        for rows in (slice(0, 2), slice(0, 4)):
            bad = tokens(4, seed=9)
            bad[rows] = 10_000
            model.zero_grad(set_to_none=True)
            with pytest.raises(IndexError):
                group.train(model, bad)

        # (2) DisTrO on rank 0, then the broadcast: the replica equals rank 0 bit for bit
        batch = tokens(8, seed=3)
        model.zero_grad(set_to_none=True)
        group.train(model, batch)
        opt = DistroOptimizer(model.parameters(), lr=1e-3, topk=4, quantize_1bit=True)
        opt.apply_results([PeerResult(b"own", tuple(opt.compress_step()))])
        digest = parameter_hash(model)
        assert group.replica_hashes() != [digest]  # the worker has not seen the update yet
        group.sync_params(model)
        assert group.replica_hashes() == [digest]
        assert parameter_hash(model) == digest  # rank 0 unchanged by the broadcast
    finally:
        group.close()
    # (3) no live child processes, and torch.distributed is torn down for the next group
    assert not any(alive(pid) for pid in pids)
    assert multiprocessing.active_children() == []
    assert not torch.distributed.is_initialized()


def test_trainer_with_data_parallelism(tmp_path):
    """DistroTrainer(data_parallelism=2) end to end, against a single-device trainer."""
    write_tokens(tmp_path / "train.bin", np.random.default_rng(5).integers(0, 256, 32 * 64), 2)
    spec = RunSpec.from_dict({"model": SPEC.to_dict(),
                              "optimizer": {"topk": 4, "warmup_steps": 0},
                              "data": {"kind": "local", "dir": str(tmp_path)}})
    state = SimpleNamespace(checkpoint=Checkpoint(CheckpointKind.Dummy, ""), step=1,
                            run_seed=SEED)
    batch = BatchId(0, 9)  # 10 sequences, inclusive
    logs = []
    me = Identity.generate()
    single = DistroTrainer(spec, "run", me, micro_batch_size=4)
    double = DistroTrainer(spec, "run", Identity.generate(), log=logs.append,
                           micro_batch_size=4, data_parallelism=2)
    try:
        single.prepare(0, state)
        double.prepare(0, state)
        pids = double.group.pids
        assert parameter_hash(double.model) == parameter_hash(single.model)
        payload = single.train(1, batch, state)
        double.train(1, batch, state)
        assert double.last_loss == pytest.approx(single.last_loss, rel=1e-6)
        for p, q in zip(double.model.parameters(), single.model.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)
        # step 2 trains on the lookahead (step 1 is in flight): the replica must train there too
        single.train(2, batch, state)
        double.train(2, batch, state)
        for p, q in zip(double.model.parameters(), single.model.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)
        # apply a round (the single trainer's result, as if it were the consensus) on both:
        # the double trainer broadcasts and checks its replica's hash (it raises on a mismatch)
        result = TrainingResult.create(me, 1, batch, payload)
        single.apply(1, [result])
        double.apply(1, [result])
        assert parameter_hash(double.model) == parameter_hash(single.model)
        assert double.group.replica_hashes() == [parameter_hash(single.model)]
        assert any("data parallelism: 2 replicas" in line for line in logs)
        assert any("on 2 replicas" in line for line in logs)
    finally:
        double.close()
    assert double.group is None
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(ValueError):
        DistroTrainer(spec, "run", Identity.generate(), data_parallelism=0)


ORPHAN = """
import sys
from psyche_client.training.parallel import DataParallelGroup
from psyche_client.training.spec import ModelSpec
g = DataParallelGroup(ModelSpec(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4,
                                num_kv_heads=4, intermediate_size=128, max_seq_len=32),
                      1, 2, "cpu", 2)
print(g.pids[0], flush=True)
sys.stdin.read()
"""


def test_workers_exit_when_rank_0_dies():
    p = subprocess.Popen([sys.executable, "-c", ORPHAN], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        assert alive(pid)
        p.kill()
        p.wait(10)
        deadline = time.monotonic() + 60
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)
    finally:
        p.kill()
        p.wait(10)


def test_cli_check():
    from psyche_client.cli.common import check_data_parallelism
    assert check_data_parallelism(1, None) is None
    assert check_data_parallelism(4, "cpu") is None  # cpu processes, for testing
    assert "must be an integer >= 1" in check_data_parallelism(0, "cpu")
    assert "needs cuda or cpu" in check_data_parallelism(2, "meta")
    visible = torch.cuda.device_count()
    problem = check_data_parallelism(visible + 2, "cuda")
    assert f"{visible} cuda device(s) are visible" in problem
