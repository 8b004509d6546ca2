"""The [config] table of state.toml takes the join settings (capacity, the sync queue, the rounds
kept for syncing peers, the warming rounds) like every RunConfig field: defaults when absent, a
message naming the field and its range when out of it."""

import pytest
import tomli_w

from psyche_client.server.state_file import StateFileError, load_state_file

CONFIG = dict(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
              epoch_time=15, total_steps=30, max_seq_len=16, min_clients=1, init_min_clients=2,
              global_batch_size_start=8, global_batch_size_end=8, checkpoint_interval=10)
JOIN = dict(max_clients=4, max_syncing=2, kept_rounds=16, sync_warmup_rounds=3)


def write(tmp_path, **config):
    path = tmp_path / "state.toml"
    path.write_text(tomli_w.dumps({"run_id": "r", "config": {**CONFIG, **config}}))
    return path


def test_the_join_settings_are_read_from_the_config_table(tmp_path):
    cfg = load_state_file(write(tmp_path, **JOIN)).config
    assert {k: getattr(cfg, k) for k in JOIN} == JOIN


def test_without_them_mid_epoch_joins_are_off(tmp_path):
    cfg = load_state_file(write(tmp_path)).config
    assert (cfg.max_clients, cfg.max_syncing, cfg.kept_rounds, cfg.sync_warmup_rounds) == (
        256, 0, 64, 2)


@pytest.mark.parametrize("field, value, allowed", [
    ("max_clients", 1, "init_min_clients"),  # below init_min_clients = 2
    ("max_clients", 257, "256"),
    ("max_syncing", 300, "256"),
    ("kept_rounds", 5, "checkpoint_interval"),  # fewer than checkpoint_interval = 10
    ("sync_warmup_rounds", 33, "32"),
])
def test_an_out_of_range_value_names_its_field(tmp_path, field, value, allowed):
    path = write(tmp_path, **{field: value})
    with pytest.raises(StateFileError) as e:
        load_state_file(path)
    assert str(path) in str(e.value) and field in str(e.value) and allowed in str(e.value)
