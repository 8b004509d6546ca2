"""Model snapshots (training/snapshot.py) and a trainer joining from one: the bytes are the same
wherever the parameters are, loading checks the shape first, and the trainer checks the loaded
parameters against the hash the peers announced."""

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from psyche_client.data.token_files import write_tokens  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.training.errors import ModelUnavailable  # noqa: E402
from psyche_client.training.model import build_model, parameter_hash  # noqa: E402
from psyche_client.training.snapshot import (  # noqa: E402
    SnapshotError,
    encode_snapshot,
    layout_of,
    load_snapshot,
    size_limit,
)
from psyche_client.training.spec import ModelSpec, RunSpec  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402
from psyche_coordinator_core import Checkpoint, CheckpointKind  # noqa: E402

SPEC = ModelSpec(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                 intermediate_size=128, max_seq_len=32)


def test_round_trip_and_shape_checks():
    a, b = build_model(SPEC, 1), build_model(SPEC, 2)
    data = encode_snapshot(a)
    assert encode_snapshot(build_model(SPEC, 1)) == data  # same parameters, same bytes
    assert len(data) <= size_limit(a)
    assert layout_of(a) == layout_of(b)
    assert layout_of(a)[1] == sum(p.numel() for p in a.parameters())
    load_snapshot(b, data)
    assert parameter_hash(b) == parameter_hash(a)
    # another shape or dtype: refused before anything is copied
    for other in (ModelSpec(**{**SPEC.to_dict(), "num_layers": 3}),
                  ModelSpec(**{**SPEC.to_dict(), "intermediate_size": 96}),
                  ModelSpec(**{**SPEC.to_dict(), "dtype": "bfloat16"})):
        c = build_model(other, 3)
        assert layout_of(c)[0] != layout_of(a)[0]
        before = parameter_hash(b)
        with pytest.raises(SnapshotError):
            load_snapshot(b, encode_snapshot(c))
        assert parameter_hash(b) == before
    with pytest.raises(SnapshotError, match="not a safetensors"):
        load_snapshot(b, b"\xff" * 64)
    tied = build_model(ModelSpec(**{**SPEC.to_dict(), "tie_embeddings": True}), 1)
    t2 = build_model(ModelSpec(**{**SPEC.to_dict(), "tie_embeddings": True}), 2)
    load_snapshot(t2, encode_snapshot(tied))  # a shared tensor travels once
    assert parameter_hash(t2) == parameter_hash(tied)


def _trainer(tmp_path):
    write_tokens(tmp_path / "train.bin", list(range(256)) * 4, 2)
    spec = RunSpec.from_dict({"model": SPEC.to_dict(), "data": {"kind": "local",
                                                                 "dir": str(tmp_path)}})
    return DistroTrainer(spec, "run", Identity.generate())


def _state(kind, step=40, seed=5):
    return SimpleNamespace(checkpoint=Checkpoint(kind, "org/repo" if kind else ""), step=step,
                           run_seed=seed)


def test_trainer_checks_the_loaded_parameters_against_the_manifest(tmp_path):
    peers = build_model(SPEC, 99)  # "the run's current model"
    data = encode_snapshot(peers)
    calls = []

    def fetch(params, payload=data):
        def f(step, layout, max_size):
            calls.append((step, layout, max_size))
            return SimpleNamespace(step=step, params=params), payload
        return f

    t = _trainer(tmp_path)
    with pytest.raises(ModelUnavailable, match="loads to params"):  # bytes and claim disagree
        t.prepare(2, _state(CheckpointKind.P2P), fetch("0" * 64))
    assert t.model is None
    with pytest.raises(ModelUnavailable, match="does not load"):
        t.prepare(2, _state(CheckpointKind.P2P),
                  fetch("0" * 64, encode_snapshot(build_model(
                      ModelSpec(**{**SPEC.to_dict(), "num_layers": 1}), 1))))
    t.prepare(2, _state(CheckpointKind.P2P), fetch(parameter_hash(peers)))
    assert parameter_hash(t.model) == parameter_hash(peers) and t.params_step == 40
    assert calls[-1] == (40, layout_of(peers)[0], size_limit(peers))
    # the epoch is applied: snapshot() notes the step and returns what to share
    got, fields = t.snapshot(52)
    assert got == data and fields == dict(step=52, params=parameter_hash(peers),
                                          layout=layout_of(peers)[0],
                                          parameters=layout_of(peers)[1])
    n = len(calls)
    t.prepare(3, _state(CheckpointKind.P2P, step=52), fetch("0" * 64))  # current: no fetch
    assert len(calls) == n
    # missed an epoch (dropped, say): the model is stale, so it is fetched again
    t.prepare(5, _state(CheckpointKind.P2P, step=70), fetch(parameter_hash(peers)))
    assert len(calls) == n + 1 and t.params_step == 70
    assert t.snapshot(80, encode=False) is None and t.params_step == 80
