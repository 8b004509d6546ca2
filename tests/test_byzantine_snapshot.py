"""The Byzantine harness's snapshot attack, short: a checkpointer records snapshots of negated
weights under the agreed hash, a client joins half-way with a fresh key, and it must end with
the honest clients' parameters, never with the poisoned ones (benchmarks/byzantine runs it at
40 steps)."""

import argparse

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.byzantine.__main__ import make_data, one_run  # noqa: E402

pytestmark = pytest.mark.slow  # about 100 s on 2 cores: 12 real DisTrO steps of 7 clients


def test_a_poisoned_snapshot_is_recorded_yet_never_loaded(tmp_path):
    args = argparse.Namespace(steps=12, clients=6, adversaries=1, verification_percent=0,
                              evidence_quorum=2, verify_sample=0, batch=2, seq_len=32,
                              lr=0.01, warmup=2,
                              topk=16, seed=1337, schedule="constant")
    row = one_run(args, make_data(tmp_path / "data"), 3.0, "poisoned_snapshot")
    assert row["outcome"] == "finished"
    assert row["poisoned_snapshots_recorded"] >= 1  # the attack reached the coordinator
    assert row["poisoned_base_loads"] >= 1  # and the joiner was pointed at it
    assert row["poisoned_base_loads_accepted"] == 0 and row["detection_rate"] == 1.0
    assert row["late_joiner_trained_steps"] > 0
    assert row["honest_params_agree"] and row["honest_results_rejected"] == 0
