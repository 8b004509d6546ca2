"""The verifier's test of one peer result: does its update point down the loss of the batch it
claims to have trained on?

An honest DisTrO result is the top-k DCT coefficients of its trainer's momentum, into which that
batch's gradient was just folded. Two scores, both against `g`, the batch's gradient at the
parameters its trainer trained at (the round's, with the lookahead of the trainer's previous
result when it trained the step before: DistroTrainer.verify stands there):

- `sign_z`, the votes: do the signs of the sent coefficients agree with the signs of `g`'s DCT
  coefficients at the same places? `sum_i g_i sign(v_i) / sqrt(sum_i g_i^2)`: the first-order
  gain of the result's 1-bit form, in units of its standard deviation under random signs, so
  exactly N(0, 1)-scaled for values that carry no information about the batch (noise), very
  negative for a flipped sign. It weighs every sent coefficient alike, so the many small ones
  of a momentum-dominated update still count; this is the test's power.
- `step_z`, the step: the first-order gain of the step the result really makes
  (`g . sign(IDCT(values))`) against the same coefficients and magnitudes under `twins` random
  signs (a permutation z-score). Big coefficients rule it, as they rule the applied update, so it
  catches a result whose few big values point up the batch while its many small ones agree.

Bad when `sign_z < SIGN_Z_MIN` (no information about the batch: noise, zeros) or
`step_z < STEP_Z_MIN` (the step goes up the batch). Measured on the byzantine benchmark's runs
(8 clients, 40 steps, from the trainer's lookahead): honest `step_z` went as low as 1.28 late in
a run (5 of 3412 under 2, the old single line), where honest `sign_z` had a median near 10 and
its lowest near 4 over the probed runs; noise scored `sign_z` under 0.8; most sign flips sit far
below 0 on both (benchmarks/README.md has the exceptions and the latest figures).
Recomputing the trainer's exact update is impossible (the payload depends on its private
momentum); this needs one forward and backward pass of the batch, one DCT of its gradient and
`twins` inverse DCTs. Float arithmetic: a verdict is one verifier's, it is never applied, so it
need not be bit-identical anywhere."""

import hashlib

import torch

# a result scoring under either line is judged bad (the module docstring has the measurements)
SIGN_Z_MIN = 2.0
STEP_Z_MIN = 0.0
TWINS = 64


def is_bad(sign_score: float, step_score: float) -> bool:
    # written so that a NaN score (values that are not numbers) is bad too
    return not (sign_score >= SIGN_Z_MIN and step_score >= STEP_Z_MIN)


def sign_z(result, gradients: list, transforms) -> list[float]:
    """The result's sign score against each of `gradients` (as in step_z): the sent
    coefficients' signs voting with the gradient's DCT coefficients there, weighted by their
    size, over the standard deviation of that sum under random signs."""
    scores = []
    for grads in gradients:
        gain = spread = 0.0
        for t, sp, g in zip(transforms, result.params, grads):
            # float64: the gains of many small coefficients sum without float32's rounding
            at = torch.gather(t.encode(g.to(torch.float64)), 1, sp.indices.cpu())
            gain += float((at * torch.sign(sp.dense_values(torch.float64).cpu())).sum())
            spread += float((at * at).sum())
        # no coefficients, or a zero gradient there: no evidence either way
        scores.append(float("inf") if spread == 0.0 else gain / spread ** 0.5)
    return scores


def _signs(transforms, indices, values) -> list:
    """Per parameter, sign(IDCT(values at the indices)): the step's direction."""
    return [torch.sign(t.decode(torch.zeros(t.nchunks, t.totalk, dtype=torch.float32)
                                .scatter_(1, idx, v)))
            for t, idx, v in zip(transforms, indices, values)]


def _gain(grads, signs) -> float:
    """sum over parameters of g . sign(IDCT(values))."""
    return sum(float((g * s).sum()) for g, s in zip(grads, signs))


def step_z(result, gradients: list, transforms, twins: int = TWINS,
           seed: bytes = b"") -> list[float]:
    """The result's permutation z-score against each of `gradients` (each a batch's float32 CPU
    gradients, one per parameter, in the optimizer's order); the twins' signs are drawn from
    `seed`, and each twin's direction is computed once for all the batches."""
    gen = torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(seed).digest()[:8], "little"))
    indices = [sp.indices.cpu() for sp in result.params]
    values = [sp.dense_values(torch.float32).cpu() for sp in result.params]
    signs = _signs(transforms, indices, values)
    own = [_gain(g, signs) for g in gradients]
    gains = [[] for _ in gradients]
    for _ in range(twins):
        flipped = [torch.where(torch.rand(v.shape, generator=gen) < 0.5, -v, v) for v in values]
        signs = _signs(transforms, indices, flipped)
        for out, g in zip(gains, gradients):
            out.append(_gain(g, signs))
    scores = []
    for mine, theirs in zip(own, gains):
        g = torch.tensor(theirs, dtype=torch.float64)
        spread = float(g.std())
        # every twin gains the same (no values, or a zero gradient): no evidence
        scores.append(float("inf") if spread == 0.0 else (mine - float(g.mean())) / spread)
    return scores
