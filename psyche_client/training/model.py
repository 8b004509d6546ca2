"""A Llama-family causal LM built from a config: no hub, random weights from the run's seed.

Every client builds the same initial weights from the same seed (same torch build and device
kind), so an epoch can start without downloading anything."""

import hashlib

import torch

from .spec import ModelSpec

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_model_code():
    """Import the model classes (transformers): seconds, tens of seconds on a loaded machine.
    The trainer does it when it is made, before its client joins a run, so that the first
    model it builds in an epoch's warmup is quick."""
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaConfig, LlamaForCausalLM


def _llama_config(spec: ModelSpec):
    LlamaConfig, _ = load_model_code()
    spec.validate()
    config = LlamaConfig(
        vocab_size=spec.vocab_size, hidden_size=spec.hidden_size,
        num_hidden_layers=spec.num_layers, num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads, intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_seq_len, tie_word_embeddings=spec.tie_embeddings,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    config._attn_implementation = "eager"  # the same kernels everywhere: reproducible
    return config


def build_model(spec: ModelSpec, seed: int, device="cpu"):
    """LlamaForCausalLM with weights drawn from `seed` alone."""
    _, LlamaForCausalLM = load_model_code()
    config = _llama_config(spec)
    devices = [torch.device(device)] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed & ((1 << 63) - 1))
        model = LlamaForCausalLM(config)
    return model.to(device=device, dtype=DTYPES[spec.dtype])


def parameter_shapes(spec: ModelSpec) -> list[tuple]:
    """The shapes of the model's parameters in `parameters()` order, with no weights made."""
    _, LlamaForCausalLM = load_model_code()
    with torch.device("meta"):
        model = LlamaForCausalLM(_llama_config(spec))
    return [tuple(p.shape) for p in model.parameters()]


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def parameter_hash(model) -> str:
    """SHA-256 over every parameter's bytes in name order: equal iff the weights are identical."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
