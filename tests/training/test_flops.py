"""Training FLOPs per token from the model's shape (training/flops.py, docs/points.md)."""

from dataclasses import replace

import pytest

from psyche_client.server.state_file import load_state_file
from psyche_client.training.flops import flops_per_token, parameter_count, tokens_per_pflop
from psyche_client.training.model import build_model
from psyche_client.training.model import parameter_count as real_parameter_count
from psyche_client.training.spec import ModelSpec

SHAPES = [
    ModelSpec(),
    ModelSpec(vocab_size=256, hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=4,
              intermediate_size=512, max_seq_len=128),  # config/llama-local
    ModelSpec(vocab_size=300, hidden_size=96, num_layers=3, num_heads=6, num_kv_heads=2,
              intermediate_size=200, max_seq_len=64),  # grouped-query attention
    ModelSpec(vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
              intermediate_size=128, max_seq_len=32, tie_embeddings=True),
]


@pytest.mark.parametrize("spec", SHAPES)
def test_parameter_count_matches_the_real_model(spec):
    assert parameter_count(spec) == real_parameter_count(build_model(spec, seed=1))


@pytest.mark.parametrize("spec", SHAPES)
def test_flops_are_6n_plus_attention(spec):
    n = real_parameter_count(build_model(spec, seed=1))
    attention = 6 * spec.num_layers * spec.hidden_size * spec.max_seq_len
    assert flops_per_token(spec) == 6 * n + attention
    assert flops_per_token(spec, seq_len=2 * spec.max_seq_len) == 6 * n + 2 * attention


def test_llama_local_by_hand():
    # 256 x 128 embeddings and head, 4 layers of 4 x 128^2 attention + 3 x 128 x 512 MLP +
    # 2 x 128 norms, a final norm: 1,115,264 parameters
    spec = SHAPES[1]
    assert parameter_count(spec) == 2 * 256 * 128 + 4 * (4 * 128**2 + 3 * 128 * 512 + 256) + 128
    assert flops_per_token(spec) == 6 * 1_115_264 + 6 * 4 * 128 * 128 == 7_084_800
    assert tokens_per_pflop(7_084_800) == 141_147_245  # ceil(1e15 / F)
    assert tokens_per_pflop(10**15) == 1 and tokens_per_pflop(10**15 + 1) == 1


def test_huge_models_stay_within_what_a_config_accepts():
    from psyche_coordinator_core.constants import MAX_FLOPS_PER_TOKEN
    huge = replace(SHAPES[0], hidden_size=1 << 20, num_heads=1, num_kv_heads=1,
                   intermediate_size=1 << 24, num_layers=1 << 12)
    assert flops_per_token(huge) == MAX_FLOPS_PER_TOKEN


def test_state_file_fills_flops_per_token_from_the_model(tmp_path):
    st = load_state_file("config/llama-local/state.toml")
    assert st.config.flops_per_token == flops_per_token(SHAPES[1]) == 7_084_800
    assert st.config.presence_points == 1 and st.config.tokens_per_compute_point == 1024
    # set in [config]: kept as given; no [model] (simulated training): unknown (0)
    text = open("config/llama-local/state.toml").read()
    given = tmp_path / "given.toml"
    given.write_text(text.replace("[config]\n", "[config]\nflops_per_token = 12345\n", 1))
    assert load_state_file(given).config.flops_per_token == 12345
    assert load_state_file("config/local/state.toml").config.flops_per_token == 0
