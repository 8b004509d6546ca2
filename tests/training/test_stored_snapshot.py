"""Snapshots in the run's store (training/stored.py, the trainer's capture and Stored prepare):
a captured snapshot loads in transformers and into a new client's model with the recorded
hash; a client never trains from anything else (another hash, no store, an unreachable store,
the run seed past the first step), passes over a poisoned recorded copy for another copy of the
same parameters, and keeps held parameters only when they are the recorded ones."""

import socket
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from psyche_client.data.token_files import write_tokens  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.snapshots import LocalStore, write_snapshot_dir  # noqa: E402
from psyche_client.training.errors import ModelUnavailable  # noqa: E402
from psyche_client.training.model import build_model, parameter_hash  # noqa: E402
from psyche_client.training.snapshot import encode_snapshot  # noqa: E402
from psyche_client.training.spec import ModelSpec, RunSpec  # noqa: E402
from psyche_client.training.stored import hf_files  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402
from psyche_coordinator_core import Checkpoint, CheckpointKind  # noqa: E402

SPEC = ModelSpec(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                 intermediate_size=128, max_seq_len=32)


def _trainer(tmp_path, store=""):
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_tokens(tmp_path / "train.bin", list(range(256)) * 4, 2)
    spec = RunSpec.from_dict({"model": SPEC.to_dict(),
                              "data": {"kind": "local", "dir": str(tmp_path)},
                              "checkpoint": {"store": store}})
    return DistroTrainer(spec, "run", Identity.generate())


def _stored(location, digest, step=40, ck_step=39):
    return SimpleNamespace(checkpoint=Checkpoint(CheckpointKind.Stored, location, "",
                                                 bytes.fromhex(digest), ck_step),
                           step=step, run_seed=5, param_hash=bytes.fromhex(digest),
                           param_step=ck_step)


def _store_snapshot(tmp_path, model):
    """A checkpointer's duty: capture, write atomically, upload; returns (store, location)."""
    t = _trainer(tmp_path / "writer")
    t.model = model
    files, digest = t.capture()
    assert set(files) == {"config.json", "model.safetensors"} and digest == parameter_hash(model)
    path = write_snapshot_dir(tmp_path / "out", run_id="run", epoch=0, step=39,
                              param_hash=digest, files=files)
    store = LocalStore(tmp_path / "store", progress=False)
    return store, store.put(path), path


def test_a_new_client_starts_from_the_recorded_snapshot(tmp_path):
    trained = build_model(SPEC, 99)  # "the run's current model", not the run seed's
    digest = parameter_hash(trained)
    store, location, path = _store_snapshot(tmp_path, trained)

    # transformers reads the snapshot as it is
    from transformers import LlamaForCausalLM
    loaded = LlamaForCausalLM.from_pretrained(path)
    assert parameter_hash(loaded) == digest

    t = _trainer(tmp_path / "new", store=str(tmp_path / "store"))
    assert t.prepare(1, _stored(location, digest), None) == digest
    assert parameter_hash(t.model) == digest and t.params_step == 40

    # another recorded hash: the download is refused, whatever the bytes
    other = _trainer(tmp_path / "other", store=str(tmp_path / "store"))
    with pytest.raises(ModelUnavailable, match="not the .* the coordinator recorded"):
        other.prepare(1, _stored(location, "ab" * 32), None)
    assert other.model is None


def test_held_parameters_are_kept_only_when_they_are_the_recorded_ones(tmp_path):
    trained = build_model(SPEC, 99)
    store, location, _ = _store_snapshot(tmp_path, trained)
    digest = parameter_hash(trained)
    # the incumbent holds the recorded parameters (at another step label): no download, even
    # from a store that is not there
    t = _trainer(tmp_path / "held", store=str(tmp_path / "missing-store"))
    t.model, t.params_step = build_model(SPEC, 99), 7
    assert t.prepare(1, _stored(location, digest), None) == digest and t.params_step == 40
    # an incumbent with other parameters (a fork) downloads the recorded ones
    t = _trainer(tmp_path / "forked", store=str(tmp_path / "store"))
    t.model, t.params_step = build_model(SPEC, 5), 40
    assert t.prepare(1, _stored(location, digest), None) == digest
    assert parameter_hash(t.model) == digest


def test_a_poisoned_recorded_copy_is_passed_over_for_another_copy_of_the_same_parameters(
        tmp_path):
    # a checkpointer stored other weights under the agreed hash, and its copy was recorded;
    # an honest checkpointer's copy of the same step is in the store too
    trained = build_model(SPEC, 99)
    digest = parameter_hash(trained)
    store, honest, _ = _store_snapshot(tmp_path / "honest", trained)
    poisoned_model = build_model(SPEC, 99)
    with torch.no_grad():
        for p in poisoned_model.parameters():
            p.neg_()
    files = hf_files(poisoned_model)
    path = write_snapshot_dir(tmp_path / "out-poisoned", run_id="run", epoch=0, step=39,
                              param_hash=digest, files=files)  # the lie: the agreed hash
    poisoned = store.put(path)
    assert poisoned != honest
    t = _trainer(tmp_path / "joiner", store=str(tmp_path / "honest" / "store"))
    assert t.load_base(_stored(poisoned, digest)) == (39, digest)
    assert parameter_hash(t.model) == digest and t.base_location == honest
    # with no other copy in the store, nothing is loaded
    lone = LocalStore(tmp_path / "lone", progress=False)
    only = lone.put(path)
    t = _trainer(tmp_path / "joiner2", store=str(tmp_path / "lone"))
    with pytest.raises(ModelUnavailable, match="not the .* the coordinator recorded"):
        t.load_base(_stored(only, digest))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("store,why", [
    ("", "names no snapshot store"),
    ("missing-store", "SnapshotNotFound"),
    ("s3://bucket/run", "StoreUnreachable"),
])
def test_a_client_that_cannot_get_the_snapshot_refuses(tmp_path, store, why):
    if store == "missing-store":
        store = str(tmp_path / store)
    t = _trainer(tmp_path, store="")
    if store.startswith("s3://"):
        t.spec = RunSpec.from_dict({"model": SPEC.to_dict(),
                                    "data": {"kind": "local", "dir": str(tmp_path)},
                                    "checkpoint": {"store": store, "endpoint":
                                                   f"http://127.0.0.1:{_closed_port()}"}})
    elif store:
        t.spec = RunSpec.from_dict({"model": SPEC.to_dict(),
                                    "data": {"kind": "local", "dir": str(tmp_path)},
                                    "checkpoint": {"store": store}})
    with pytest.raises(ModelUnavailable, match=why):
        t.prepare(1, _stored("cd" * 32, "ab" * 32), None)
    assert t.model is None


def test_the_run_seed_past_the_first_step_is_refused(tmp_path):
    t = _trainer(tmp_path)
    state = SimpleNamespace(checkpoint=Checkpoint(), step=40, run_seed=5)
    with pytest.raises(ModelUnavailable, match="no snapshot recorded"):
        t.prepare(1, state, None)
    assert t.model is None
    assert t.prepare(0, SimpleNamespace(checkpoint=Checkpoint(), step=1, run_seed=5), None)


def test_the_peers_snapshot_must_be_the_agreed_parameters(tmp_path):
    peers = build_model(SPEC, 99)
    data = encode_snapshot(peers)

    def fetch(step, layout, max_size):
        return SimpleNamespace(step=step, params=parameter_hash(peers)), data

    state = SimpleNamespace(checkpoint=Checkpoint(CheckpointKind.P2P, "p2p"), step=40,
                            run_seed=5, param_hash=bytes.fromhex("ab" * 32), param_step=39)
    t = _trainer(tmp_path)
    with pytest.raises(ModelUnavailable, match="the witnesses agreed on"):
        t.prepare(1, state, fetch)
    state.param_hash = bytes.fromhex(parameter_hash(peers))
    assert t.prepare(1, state, fetch) == parameter_hash(peers)


def test_a_joiner_keeps_the_recorded_snapshot_as_its_base(tmp_path):
    """load_base downloads the recorded snapshot whatever the checkpoint kind (a mid-epoch
    joiner's is P2P), labels it with its step, and reset_to_base puts it back after the
    parameters moved, without the store."""
    trained = build_model(SPEC, 99)
    digest = parameter_hash(trained)
    store, location, _ = _store_snapshot(tmp_path, trained)
    t = _trainer(tmp_path / "joiner", store=str(store.root))
    st = _stored(location, digest)
    st.checkpoint = Checkpoint(CheckpointKind.P2P, location, "", bytes.fromhex(digest), 39)
    st.config = SimpleNamespace(total_steps=100)
    assert t.load_base(st) == (39, digest)
    with torch.no_grad():
        next(t.model.parameters()).add_(1.0)
    assert parameter_hash(t.model) != digest
    store.root.rename(tmp_path / "gone")  # no download this time
    assert t.reset_to_base() == (39, digest) and parameter_hash(t.model) == digest
    # nothing recorded and the run past its seed: no base to replay from
    fresh = _trainer(tmp_path / "other")
    st.checkpoint = Checkpoint(CheckpointKind.P2P)
    with pytest.raises(ModelUnavailable, match="nothing to replay from"):
        fresh.load_base(st)
    st.checkpoint = Checkpoint(CheckpointKind.Dummy)  # the run seed's model trains step 1
    assert fresh.load_base(st) == (1, parameter_hash(build_model(SPEC, 5)))
