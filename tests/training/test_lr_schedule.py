"""The learning-rate schedule of the run spec: warmup, then constant or cosine to a fraction of
the peak at the run's last step, with a cosine that does not depend on the platform's libm."""

import math

import pytest

from psyche_client.training.spec import OptimizerSpec, RunSpec, SpecError, _cos_pi


def test_cosine_matches_the_formula_and_ends_at_the_fraction():
    o = OptimizerSpec(lr=0.01, warmup_steps=10, schedule="cosine", final_lr_fraction=0.1)
    assert o.lr_at(5, 110) == pytest.approx(0.005)  # warmup
    assert o.lr_at(10, 110) == pytest.approx(0.01)  # peak
    assert o.lr_at(60, 110) == pytest.approx(0.01 * (0.1 + 0.9 * 0.5))  # halfway
    assert o.lr_at(110, 110) == pytest.approx(0.001) == o.lr_at(500, 110)  # floor after the end
    lrs = [o.lr_at(s, 110) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    assert o.lr_at(60, None) == 0.01  # no run length known: constant
    assert OptimizerSpec(lr=0.01, warmup_steps=10).lr_at(60, 110) == 0.01  # the default


def test_cos_pi_is_accurate():
    worst = max(abs(_cos_pi(i / 4096) - math.cos(math.pi * i / 4096)) for i in range(4097))
    assert worst < 1e-15
    assert _cos_pi(0.0) == 1.0 and _cos_pi(1.0) == -1.0


@pytest.mark.parametrize("bad,why", [({"schedule": "linear"}, "schedule"),
                                     ({"final_lr_fraction": 1.5}, "final_lr_fraction")])
def test_bad_schedules_are_refused(bad, why):
    with pytest.raises(SpecError, match=why):
        RunSpec.from_dict({"model": {"vocab_size": 256}, "optimizer": bad})
