"""The verifier's two scores (psyche_client/training/judge.py) on synthetic gradients: an honest
update (the top-k DCT coefficients of a momentum into which the batch's gradient was folded)
passes; noise scores like N(0, 1) on the sign test; a flipped update, zeros, values that are not
numbers, and an update whose few big values point up the batch are judged bad. The overlap
test (coefficients sent again hold the batch's gradient alone) on a real DistroOptimizer."""

import torch

from psyche_client.training.dct import ChunkedDCT
from psyche_client.training.distro import PeerResult, SparseParam
from psyche_client.training.judge import (
    OVERLAP_AGREE_MIN,
    OVERLAP_MIN,
    SIGN_Z_AGAINST,
    SIGN_Z_MIN,
    STEP_AGAINST,
    STEP_MIN,
    is_bad,
    overlap,
    sign_z,
    step_gain,
    votes,
)

SHAPES = [(64, 64), (128, 32)]
K = 16


def setup(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    transforms = [ChunkedDCT(s, 32) for s in SHAPES]
    grads = [torch.randn(s, generator=gen) for s in SHAPES]
    # an honest momentum: this batch's gradient on top of what earlier batches left behind
    momentum = [g + 2.0 * torch.randn(g.shape, generator=gen) for g in grads]
    params = []
    for t, m in zip(transforms, momentum):
        c = t.encode(m)
        idx, _ = torch.sort(torch.topk(c.abs(), K, dim=1).indices, dim=1)
        params.append(SparseParam(t.shape, t.chunk, idx, torch.gather(c, 1, idx)))
    return transforms, grads, params, gen


def scores(transforms, grads, params):
    result = PeerResult(b"k", tuple(params))
    return sign_z(result, [grads], transforms)[0], step_gain(result, [grads], transforms)[0]


def with_values(params, f):
    return [SparseParam(p.shape, p.chunk, p.indices, f(p.values)) for p in params]


def test_an_honest_update_passes_and_its_flip_does_not():
    transforms, grads, params, _ = setup()
    honest = scores(transforms, grads, params)
    flipped = scores(transforms, grads, with_values(params, lambda v: -v))
    assert honest[0] > 2 * SIGN_Z_MIN and honest[1] > STEP_MIN + 0.05, honest
    assert not is_bad(*honest)
    assert flipped[0] < -2 and flipped[1] < -0.05, flipped
    assert is_bad(*flipped)


def test_noise_scores_like_a_standard_normal_on_the_sign_test():
    transforms, grads, params, gen = setup(1)
    draws = torch.tensor([
        sign_z(PeerResult(b"k", tuple(with_values(
            params, lambda v: torch.randn(v.shape, generator=gen)))), [grads], transforms)[0]
        for _ in range(300)])
    assert abs(float(draws.mean())) < 0.2 and 0.8 < float(draws.std()) < 1.2, draws
    # and so most of it is judged bad
    assert float((draws < SIGN_Z_MIN).float().mean()) > 0.9


def test_zeros_and_values_that_are_not_numbers_are_bad():
    transforms, grads, params, _ = setup(2)
    zeros = scores(transforms, grads, with_values(params, torch.zeros_like))
    assert zeros[0] == 0.0 and is_bad(*zeros)
    nan = scores(transforms, grads, with_values(params, lambda v: torch.full_like(v, float("nan"))))
    assert is_bad(*nan)


def test_a_few_big_values_pointing_up_the_batch_are_caught_by_the_step_score():
    """The many small coefficients agree with the batch (a good sign score); the few biggest are
    flipped and blown up, so the step the result makes goes up the batch."""
    transforms, grads, params, _ = setup(3)

    def crafted(v):
        big = v.abs() >= v.abs().quantile(0.9, dim=1, keepdim=True)
        return torch.where(big, -50 * v, v)

    sign, step = scores(transforms, grads, with_values(params, crafted))
    assert sign >= SIGN_Z_MIN, sign
    assert step < STEP_MIN, step
    assert is_bad(sign, step)


# ------------------------------------------------------------------ the overlap test
def two_steps(seed: int, carry: float):
    """A real DistroOptimizer sends twice (one parameter of 64 x 64, chunks of 32, k 64): first
    a gradient of scale `carry` (what earlier batches leave in the momentum), then this batch's
    gradient `g`, small noise plus big coefficients at a quarter of the places sent the first
    time (a direction the batches share), so that the second result sends some of them again.
    Returns the transforms, [g], the first and the second result."""
    from psyche_client.training.distro import DistroOptimizer

    gen = torch.Generator().manual_seed(seed)
    p = torch.nn.Parameter(torch.zeros(64, 64))
    opt = DistroOptimizer([p], lr=1.0, topk=64, chunk=32)
    t = opt.transforms[0]
    p.grad = carry * torch.randn(64, 64, generator=gen)
    first = opt.compress_step(1.0)
    again = first[0].indices[:, ::4]
    spikes = torch.zeros(t.nchunks, t.totalk, dtype=torch.float64).scatter_(
        1, again, 10 * carry * torch.randn(again.shape, generator=gen, dtype=torch.float64))
    g = (0.3 * torch.randn(64, 64, generator=gen) + t.decode(spikes).float())
    p.grad = g.clone()
    second = opt.compress_step(1.0)
    return opt.transforms, [g], PeerResult(b"k", tuple(first)), PeerResult(b"k", tuple(second))


def test_the_overlap_agrees_exactly_on_an_honest_update():
    """Error feedback took the first result's coefficients out of the momentum, so where the
    second sends them again it sends the batch's gradient alone: every sign agrees."""
    transforms, grads, first, second = two_steps(0, carry=20.0)
    ov = overlap(second, first, votes(second, grads, transforms), transforms)
    assert ov.count >= OVERLAP_MIN and ov.agree == 1.0, ov
    assert not is_bad(*scores(transforms, grads, list(second.params)), ov)


def test_with_an_agreeing_overlap_only_evidence_against_the_batch_counts():
    """A weak sign score (an update ruled by older momentum) is not bad when the overlap
    agrees; the same scores without an overlap are."""
    transforms, grads, first, second = two_steps(0, carry=20.0)
    ov = overlap(second, first, votes(second, grads, transforms), transforms)
    weak = type(ov)(ov.count, ov.agree, 0.5)
    assert is_bad(0.5, 0.001) and not is_bad(0.5, 0.001, weak)
    assert is_bad(0.5, STEP_AGAINST - 0.01, weak)


def test_noise_flips_and_zeros_fail_the_overlap():
    transforms, grads, first, second = two_steps(1, carry=20.0)
    gen = torch.Generator().manual_seed(5)
    for name, f in (("noise", lambda v: torch.randn(v.shape, generator=gen)),
                    ("flipped", lambda v: -v), ("zeros", torch.zeros_like),
                    ("nan", lambda v: torch.full_like(v, float("nan")))):
        bad = PeerResult(b"k", tuple(with_values(second.params, f)))
        ov = overlap(bad, first, votes(bad, grads, transforms), transforms)
        assert ov.count >= OVERLAP_MIN, (name, ov)
        assert not ov.agree >= OVERLAP_AGREE_MIN, (name, ov)
        assert is_bad(*scores(transforms, grads, list(bad.params)), ov), name


def test_an_agreeing_overlap_does_not_clear_a_rest_against_the_batch():
    """The overlap's signs kept, every other coefficient flipped: the rest's sign score is
    evidence against the batch, so it is bad whatever the overlap says."""
    transforms, grads, first, second = two_steps(2, carry=1.0)
    keep = []
    for sp, before in zip(second.params, first.params):
        rows = torch.arange(sp.indices.shape[0]).unsqueeze(1) * 32 * 32
        both = torch.isin(sp.indices + rows, before.indices + rows)
        keep.append(SparseParam(sp.shape, sp.chunk, sp.indices,
                                torch.where(both, sp.values, -sp.values)))
    crafted = PeerResult(b"k", tuple(keep))
    ov = overlap(crafted, first, votes(crafted, grads, transforms), transforms)
    assert ov.agree == 1.0 and ov.rest_sign_z < SIGN_Z_AGAINST, ov
    assert is_bad(*scores(transforms, grads, keep), ov)


def test_too_small_an_overlap_leaves_the_plain_test_to_decide():
    transforms, grads, first, second = two_steps(3, carry=20.0)
    ov = overlap(second, first, votes(second, grads, transforms), transforms)
    few = type(ov)(OVERLAP_MIN - 1, ov.agree, ov.rest_sign_z)
    sign, step = scores(transforms, grads, list(second.params))
    assert is_bad(sign, step, few) == is_bad(sign, step)
