"""The verifier's two scores (psyche_client/training/judge.py) on synthetic gradients: an honest
update (the top-k DCT coefficients of a momentum into which the batch's gradient was folded)
passes; noise scores like N(0, 1) on the sign test; a flipped update, zeros, values that are not
numbers, and an update whose few big values point up the batch are judged bad."""

import torch

from psyche_client.training.dct import ChunkedDCT
from psyche_client.training.distro import PeerResult, SparseParam
from psyche_client.training.judge import SIGN_Z_MIN, STEP_MIN, is_bad, sign_z, step_gain

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
