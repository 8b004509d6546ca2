"""Robust aggregation: `clip` bounds each result's influence on the consensus mean (norm
clipping at clip x the round's median norm, per parameter), deterministically; the run spec
carries it."""

import random

import pytest

torch = pytest.importorskip("torch")

from psyche_client.training.dct import ChunkedDCT  # noqa: E402
from psyche_client.training.distro import (  # noqa: E402
    DistroOptimizer,
    PeerResult,
    SparseParam,
    value_norm,
)
from psyche_client.training.spec import RunSpec, SpecError  # noqa: E402

SHAPES = [(32, 48), (40,), (3, 4, 16)]


def result(key, idx, vals):
    return PeerResult(key, (SparseParam((8,), (1, 8), torch.tensor([idx]),
                                        torch.tensor([vals], dtype=torch.float32)),))


def apply_one(results, clip):
    p = torch.zeros(8)
    DistroOptimizer([p], topk=2, chunk=8, clip=clip).apply_results(results, lr=1.0)
    return p


def expected(mean):
    q = ChunkedDCT((8,), 8).decode(torch.tensor([mean], dtype=torch.float64))
    return -torch.sign(q).float()


def consensus(results, clip):
    opt = DistroOptimizer([torch.zeros(8)], topk=2, chunk=8, clip=clip)
    ordered = sorted(results, key=lambda r: r.key)
    return opt._consensus_mean(ordered, 0, opt.transforms[0])[0]


def test_scaled_result_no_longer_decides_the_sign():
    # Three honest results push coefficients 1 and 2 up; a fourth, scaled x100, pushes them down.
    honest = [result(bytes([i]), [1, 2], [v, 0.5]) for i, v in enumerate((1.0, 1.25, 1.5))]
    attacker = result(b"\xff", [1, 2], [-100.0, -50.0])
    # without the clip the attacker's values dominate the mean: the update follows its sign
    off = consensus(honest + [attacker], clip=0)
    assert off[1] == (3.75 - 100) / 4 and off[2] == (1.5 - 50) / 4
    assert torch.equal(apply_one(honest + [attacker], clip=0), expected(off.tolist()))
    # with clip 2 its norm is cut to 2x the median norm: the honest majority decides the sign
    on = consensus(honest + [attacker], clip=2.0)
    assert on[1] > 0 and on[2] > 0
    assert all(x == 0 for i, x in enumerate(on.tolist()) if i not in (1, 2))
    assert torch.equal(apply_one(honest + [attacker], clip=2.0), expected(on.tolist()))
    # the attacker's scaled values: exactly 2 x median / its norm
    opt = DistroOptimizer([torch.zeros(8)], topk=2, chunk=8, clip=2.0)
    scales = opt.clip_scales(sorted(honest + [attacker], key=lambda r: r.key), 0)
    assert scales[:3] == [1.0, 1.0, 1.0]
    n = sorted(value_norm(r.params[0]) for r in honest + [attacker])
    assert scales[3] == 2.0 * ((n[1] + n[2]) / 2) / value_norm(attacker.params[0])


def test_honest_results_within_the_bound_are_unchanged():
    # norms from 1.1 to 1.7: the largest is within 1.5x the median (1.4)
    rs = [result(bytes([i]), [0, 3 + i % 3], [1.0 + 0.2 * i, (-0.5) ** i]) for i in range(5)]
    opt = DistroOptimizer([torch.zeros(8)], topk=2, chunk=8, clip=2.0)
    ordered = sorted(rs, key=lambda r: r.key)
    assert opt.clip_scales(ordered, 0) == [1.0] * 5
    for clip in (1.5, 2.0, 10.0):
        assert torch.equal(apply_one(rs, clip), apply_one(rs, 0))


def test_clip_bounds_the_norm_exactly_as_documented():
    rs = [result(b"a", [0, 1], [3.0, 4.0]),  # norm 5
          result(b"b", [0, 1], [0.0, -1.0]),  # norm 1
          result(b"c", [2, 3], [0.0, 2.0]),  # norm 2
          result(b"d", [4, 5], [0.0, 0.0])]  # norm 0
    opt = DistroOptimizer([torch.zeros(8)], topk=2, chunk=8, clip=1.0)
    assert [value_norm(r.params[0]) for r in rs] == [5.0, 1.0, 2.0, 0.0]
    # median of [0, 1, 2, 5] = 1.5; bound 1.5: a -> 1.5/5, c -> 1.5/2, b and d unchanged
    assert opt.clip_scales(rs, 0) == [0.3, 1.0, 0.75, 1.0]


def test_one_bit_results_are_untouched_by_the_clip():
    g = torch.Generator().manual_seed(4)
    results = []
    for i in range(5):
        idx = torch.rand(1, 64, generator=g).argsort(1)[:, :6].sort(1).values
        results.append(PeerResult(bytes([i]), (SparseParam((64,), (1, 64), idx,
                                                           torch.rand(1, 6, generator=g) < 0.5),)))
    outs = []
    for clip in (0, 1.0, 2.0):
        p = torch.linspace(-1, 1, 64)
        opt = DistroOptimizer([p], topk=6, chunk=64, quantize_1bit=True, clip=clip)
        assert opt.clip_scales(results, 0) == [1.0] * 5
        opt.apply_results(results, lr=0.1)
        outs.append(p)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def peers(opt, rng, step, scale_one=None):
    out = []
    for i in range(6):
        g = torch.Generator().manual_seed(100 * step + i)
        params = []
        for t, k in zip(opt.transforms, opt.ks):
            idx = torch.rand(t.nchunks, t.totalk, generator=g).argsort(1)[:, :k].sort(1).values
            val = torch.randn(t.nchunks, k, generator=g) * 1e-3 * (1 + i)
            if i == scale_one:
                val = val * 100
            params.append(SparseParam(t.shape, t.chunk, idx, val))
        out.append(PeerResult(rng.randbytes(8), tuple(params)))
    return out


@pytest.mark.parametrize("agg_dtype", [torch.float64, torch.float32])
def test_clipped_apply_is_bit_identical_in_any_order_and_thread_count(agg_dtype):
    runs = []
    for order, threads in [(0, 1), (1, 2), (2, 1)]:
        params = [torch.randn(s, generator=torch.Generator().manual_seed(7)) for s in SHAPES]
        opt = DistroOptimizer(params, topk=8, chunk=16, clip=2.0, weight_decay=0.01,
                              agg_dtype=agg_dtype)
        rng = random.Random(5)
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for step in range(3):
                rs = peers(opt, rng, step, scale_one=2)
                rs = [rs, rs[::-1], random.Random(step).sample(rs, len(rs))][order]
                opt.apply_results(rs, lr=0.01)
        finally:
            torch.set_num_threads(before)
        runs.append(params)
    for other in runs[1:]:
        assert all(torch.equal(x, y) for x, y in zip(runs[0], other))
    # and the clip did something here: the unclipped run differs
    params = [torch.randn(s, generator=torch.Generator().manual_seed(7)) for s in SHAPES]
    opt = DistroOptimizer(params, topk=8, chunk=16, weight_decay=0.01, agg_dtype=agg_dtype)
    rng = random.Random(5)
    for step in range(3):
        opt.apply_results(peers(opt, rng, step, scale_one=2), lr=0.01)
    assert not all(torch.equal(x, y) for x, y in zip(runs[0], params))


@pytest.mark.parametrize("bad", [0.5, -1, float("nan"), float("inf"), True, "2"])
def test_optimizer_refuses_bad_clip(bad):
    with pytest.raises(ValueError, match="clip"):
        DistroOptimizer([torch.zeros(8)], clip=bad)


def test_run_spec_parses_clip():
    assert RunSpec.from_dict({}).optimizer.clip == 3.0  # the default (benchmarks/byzantine)
    spec = RunSpec.from_dict({"optimizer": {"clip": 2.5, "quantize_1bit": False}})
    assert spec.optimizer.clip == 2.5
    assert RunSpec.from_dict({"optimizer": {"clip": 3}}).optimizer.clip == 3
    assert RunSpec.from_dict({"optimizer": {"clip": 0}}).optimizer.clip == 0


@pytest.mark.parametrize("bad", [0.5, -2.0, float("nan"), float("inf"), True, "2"])
def test_run_spec_refuses_bad_clip_with_a_clear_error(bad):
    with pytest.raises(SpecError, match=r"optimizer\.clip = .*must be 0 \(off\) or a number >= 1"):
        RunSpec.from_dict({"optimizer": {"clip": bad}})


def test_run_spec_parses_grad_clip_and_the_trainer_clips_with_it():
    """Each trainer's gradient clip (benchmarks/byzantine: a batch's spike otherwise rules its
    momentum for rounds and the screen leaves its results out)."""
    assert RunSpec.from_dict({}).optimizer.grad_clip == 5.0
    assert RunSpec.from_dict({"optimizer": {"grad_clip": 0}}).optimizer.grad_clip == 0
    assert RunSpec.from_dict({"optimizer": {"grad_clip": 1}}).optimizer.grad_clip == 1


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True, "2"])
def test_run_spec_refuses_bad_grad_clip_with_a_clear_error(bad):
    with pytest.raises(SpecError, match=r"optimizer\.grad_clip = .*must be 0 \(off\)"):
        RunSpec.from_dict({"optimizer": {"grad_clip": bad}})


def test_compress_step_clips_the_gradient_to_max_grad_norm():
    """A spike's gradient enters the momentum at the clip's norm: the update is that of the
    gradient scaled down to it."""
    out = []
    for grad, clip in ((torch.full((8, 8), 10.0), 1.0), (torch.full((8, 8), 10.0 / 80), None)):
        p = torch.zeros(8, 8, requires_grad=True)
        opt = DistroOptimizer([p], topk=4, chunk=8, quantize_1bit=False, max_grad_norm=clip)
        p.grad = grad.clone()
        out.append(opt.compress_step(lr=1.0)[0].values)
    assert torch.allclose(out[0], out[1])  # norm 80 clipped to 1 == the gradient / 80
