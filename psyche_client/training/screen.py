"""The apply-time screen: which of a round's results stay out of the DisTrO mean.

Validation keeps out what does not fit the model; the verifiers judge a sample; the clip bounds
what is left. The screen is the step between: a pure function of the round's consensus set, so
every client leaves out the same results, that catches the two shapes of harm a clip alone only
dampens, each against the round's own majority (no history, no trust):

- **magnitude**: a result whose values' L2 norm (all parameters together) is more than
  ``NORM_LIMIT`` times the median of the round's norms. Honest norms stay within about 2.5x of
  the median in benchmarks/byzantine; an update scaled x100 is 100x.
- **direction**: a result that points away from the round's majority. Two passes, so a
  minority pulling the other way cannot drag honest results below zero. The first measures
  each result against the others' sign votes (per coefficient, the sum of the signs of the
  results that picked it: one vote each, so a few large results cannot outweigh the rest),
  drops the most opposed result from the votes while one is opposed and the dropped stay a
  minority, and calls those left with a positive dot the agreeing set. If that is a strict
  majority of the round, the second pass measures each result outside it against the agreeing
  set's summed values ``R`` and leaves it out when its cosine with ``R`` is at most
  ``-OPPOSED``: both tests must say so, and clearly (an honest update late in a run can sit a
  hair below zero; the verifiers' test, not this one, judges those).
  When no majority agrees, nothing is left out by direction. (In a round with no common
  direction at all, chance agreement can still leave out a minority; none carries signal then.)

The direction test is a sign test, not a significance test: a result that is merely orthogonal
to the round (random values on honest indices) is left out only about half the time. Late in a
small run, honest updates agree with the round by as little as 0.007 in cosine, which random
values of the same size reach as often; telling those apart is the verifiers' job (judge.py).

Fewer than ``MIN_RESULTS`` results have no majority to speak of: nothing is screened.

Every client must reach the same verdict on the same bits, so the sums are made exact or
order-free: each value is widened to float64; the votes are small integers; the reference ``R``
is a scatter-add in key order (indices are unique within a chunk); each product is one IEEE
multiplication (of ``v`` and the reference less its own share, one IEEE subtraction); and each
sum of products or squares is ``math.fsum`` (correctly rounded, whatever the order or SIMD width).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

NORM_LIMIT = 10.0
MIN_RESULTS = 3
# cosine with the agreeing majority's sum at or under -OPPOSED leaves a result out: sign flips
# early in a run sit at -0.17 or lower; a client that joined late (its momentum holds only the
# batches since) sent honest results down to -0.052 in benchmarks/byzantine (traced), and a
# fresh-key Sybil's honest update as low as -0.059. The verifiers' evidence catches flips in any
# round; this line only has to be clear of honest results
OPPOSED = 0.1


@dataclass(frozen=True)
class LeftOut:
    key: bytes
    why: str


def sumsq(values: torch.Tensor) -> float:
    """The sum of the squares of float64 values, correctly rounded whatever the order (the
    squares of float32/bf16/fp16 values are exact in float64)."""
    return math.fsum((values * values).reshape(-1).tolist())


class _Widened:
    """A result's per-parameter (indices, float64 values) on the CPU, converted once: every pass
    of the screen reads them again."""

    def __init__(self, result):
        self.key = result.key
        self.params = [(sp.indices.to("cpu"), sp.dense_values(torch.float64).to("cpu"))
                       for sp in result.params]
        self.sumsq = math.fsum(sumsq(v) for _, v in self.params)


def _reference(results: Sequence, transforms, vote: bool) -> list[torch.Tensor]:
    """Per parameter, the dense float64 sum over the given results (in the given order) of
    their values, or with ``vote`` of their values' signs (each result one vote per coefficient
    it picked; integers, so exact)."""
    out = []
    for i, t in enumerate(transforms):
        s = torch.zeros(t.nchunks, t.totalk, dtype=torch.float64)
        for r in results:
            idx, v = r.params[i]
            s.scatter_add_(1, idx, torch.sign(v) if vote else v)
        out.append(s)
    return out


def _dot(result, reference: list[torch.Tensor], own: str | None) -> float:
    """dot(v, reference - v's own share in it): own is "values", "votes" or None (not in it)."""
    parts = []
    for (idx, v), ref in zip(result.params, reference):
        rest = ref.gather(1, idx)
        if own is not None:
            rest = rest - (torch.sign(v) if own == "votes" else v)
        parts.append(math.fsum((v * rest).reshape(-1).tolist()))
    return math.fsum(parts)


def screen(ordered: Sequence, transforms) -> list[LeftOut]:
    """The results of ``ordered`` (sorted by key, already checked against the layout) that stay
    out of this round's mean, with why; ``transforms``: the optimizer's per-parameter
    ``ChunkedDCT`` (their chunk counts and sizes)."""
    if len(ordered) < MIN_RESULTS:
        return []
    out = []
    widened = [_Widened(r) for r in ordered]
    norms = sorted(math.sqrt(w.sumsq) for w in widened)
    m = len(norms) // 2
    median = norms[m] if len(norms) % 2 else (norms[m - 1] + norms[m]) / 2
    kept = []
    for w in widened:
        norm = math.sqrt(w.sumsq)
        if median > 0 and norm > NORM_LIMIT * median:
            out.append(LeftOut(w.key, f"its norm is {norm / median:.0f}x the round's median"))
        else:
            kept.append(w)
    if len(kept) < MIN_RESULTS:
        return out
    # pass 1: against the others' sign votes (one vote each, so a few large results cannot
    # outweigh the rest), trimming the most opposed result while it is opposed and the trimmed
    # stay a minority: two flipped results of six would otherwise cancel two honest votes
    votes = _reference(kept, transforms, vote=True)
    active = list(kept)
    while True:
        dots = {r.key: _dot(r, votes, own="votes") for r in active}
        worst = min(active, key=lambda r: (dots[r.key], r.key))
        if dots[worst.key] >= 0 or 2 * (len(kept) - len(active) + 1) >= len(kept):
            break
        active.remove(worst)
        for (idx, v), ref in zip(worst.params, votes):
            ref.scatter_add_(1, idx, -torch.sign(v))
    agreeing = [r for r in active if dots[r.key] > 0]
    if 2 * len(agreeing) <= len(kept):
        return out  # no majority direction this round
    # pass 2: the others against the sum of the agreeing majority alone. A member is never
    # left out: one at right angles to the majority's values (an honest update late in a run
    # can be, to 1e-7 in cosine) is not against it, and it agreed with the votes
    ref = _reference(agreeing, transforms, vote=False)
    ref_norm = math.sqrt(math.fsum(sumsq(x) for x in ref))
    members = {r.key for r in agreeing}
    for r in kept:
        if r.key in members:
            continue
        dot = _dot(r, ref, own=None)
        if dot <= 0 and dot <= -OPPOSED * math.sqrt(r.sumsq) * ref_norm:
            cos = dot / (math.sqrt(r.sumsq) * ref_norm) if ref_norm and r.sumsq else 0.0
            out.append(LeftOut(r.key, f"it points away from the round's other results "
                                      f"(cosine {cos:.3f})"))
    return out
