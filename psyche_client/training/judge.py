"""The verifier's test of one peer result: does its update point down the loss of the batch it
claims to have trained on?

An honest DisTrO result is the top-k DCT coefficients of its trainer's momentum, into which that
batch's gradient was just folded, so the step it makes (`p -= lr * sign(IDCT(values))`) goes down
that batch's loss: its first-order gain `g . sign(IDCT(values))`, with `g` the batch's gradient
at the parameters its trainer trained at (the round's, with the lookahead of the trainer's
previous result when it trained the step before: DistroTrainer.verify stands there), is large.
Random values at the same coefficients are exchangeable with any sign pattern of them, and a
flipped update goes up. So the test compares the result's gain with the gains of `twins`: the
same coefficients and magnitudes under random signs. Its score is how many of the twins'
standard deviations the result's gain lies above their mean (a permutation z-score: about
N(0, 1) for noise, very negative for a flipped sign).

Measured on the byzantine benchmark's runs (8 clients, 40 steps): from the trainer's lookahead,
5 of 3412 honest verdicts scored under 2 (1.28 at the lowest, late in a run), where from the
bare parameters 15 of 3409 had, down to -4.4; random values scored at most 1.8 and most sign
flips far below 0 (benchmarks/README.md has the exceptions). `Z_MIN` is the line.
Recomputing the trainer's exact update is impossible (the payload depends on its private
momentum); this needs one forward and backward pass of the batch and `twins` inverse DCTs.
Float arithmetic: a verdict is one verifier's, it is never applied, so it need not be
bit-identical anywhere."""

import hashlib

import torch

# results scoring under this are judged bad (the module docstring has the measurements)
Z_MIN = 2.0
TWINS = 64


def _signs(transforms, indices, values) -> list:
    """Per parameter, sign(IDCT(values at the indices)): the step's direction."""
    return [torch.sign(t.decode(torch.zeros(t.nchunks, t.totalk, dtype=torch.float32)
                                .scatter_(1, idx, v)))
            for t, idx, v in zip(transforms, indices, values)]


def _gain(grads, signs) -> float:
    """sum over parameters of g . sign(IDCT(values))."""
    return sum(float((g * s).sum()) for g, s in zip(grads, signs))


def alignment_z(result, gradients: list, transforms, twins: int = TWINS,
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
