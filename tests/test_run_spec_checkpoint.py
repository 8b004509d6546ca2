"""The [checkpoint] table of state.toml holds two things: the coordinator's initial checkpoint
(kind, repo, revision, hash, step) and the run's snapshot store (store, endpoint, keep), which
goes to the clients in the run spec and never carries credentials."""

import pytest
import tomli_w

from psyche_client.server.state_file import StateFileError, load_run_spec, load_state_file
from psyche_client.training.spec import CheckpointSpec, RunSpec, SpecError
from psyche_coordinator_core import CheckpointKind

CONFIG = dict(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
              epoch_time=15, total_steps=30, max_seq_len=16, min_clients=1, init_min_clients=1,
              global_batch_size_start=8, global_batch_size_end=8)


def write(tmp_path, checkpoint, model=True):
    tables = {"run_id": "r", "config": CONFIG, "checkpoint": checkpoint}
    if model:
        tables["model"] = {"max_seq_len": 16}
    path = tmp_path / "state.toml"
    path.write_text(tomli_w.dumps(tables))
    return path


def test_the_table_is_split_between_the_coordinator_and_the_spec(tmp_path):
    path = write(tmp_path, {"kind": "Hub", "repo": "org/base", "store": "snapshots",
                            "keep": 5})
    st = load_state_file(path)
    assert st.checkpoint.kind == CheckpointKind.Hub and st.checkpoint.repo == "org/base"
    spec = load_run_spec(path, st)
    # a local store is resolved against the state file, like the data directories
    assert spec.checkpoint == CheckpointSpec(str(tmp_path / "snapshots"), "", 5)
    assert RunSpec.from_dict(spec.to_dict()).checkpoint == spec.checkpoint  # as clients get it

    path = write(tmp_path, {"store": "s3://b/run", "endpoint": "http://127.0.0.1:7070"})
    st = load_state_file(path)
    assert st.checkpoint.kind == CheckpointKind.Dummy  # store keys alone: the default source
    assert load_run_spec(path, st).checkpoint == CheckpointSpec("s3://b/run",
                                                                "http://127.0.0.1:7070", 3)


@pytest.mark.parametrize("table,why", [
    ({"store": "s3://b/run", "secret_key": "x"}, "unknown key 'secret_key'"),
    ({"store": "/tmp/x", "endpoint": "http://h:1"}, "only for an s3:// store"),
    ({"store": "s3://b/run", "keep": 0}, "keep must be an integer >= 1"),
])
def test_bad_store_settings_are_named(tmp_path, table, why):
    path = write(tmp_path, table)
    with pytest.raises((StateFileError, SpecError), match=why):
        load_run_spec(path, load_state_file(path))
