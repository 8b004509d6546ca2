"""Training FLOPs per token estimated from the model's shape (no torch: the server uses it).

docs/points.md: 6 x parameters (a forward and a backward pass over every weight: 2 FLOPs per
multiply-add forward, 4 backward) plus the attention's 6 x layers x hidden x seq_len (the scores
and the weighted sum, forward and backward; the "6N + attention" estimate of Kaplan et al. and
PaLM's appendix B). The run config's `flops_per_token` is a display figure: compute in FLOPs =
tokens x flops_per_token."""

from psyche_coordinator_core.constants import MAX_FLOPS_PER_TOKEN

from .spec import ModelSpec


def parameter_count(m: ModelSpec) -> int:
    """The parameters of the Llama that training/model.py builds from `m` (no biases; RMSNorm
    weights; grouped-query attention; the output head unless tied to the embeddings)."""
    head_dim = m.hidden_size // m.num_heads
    kv = m.num_kv_heads * head_dim
    attention = 2 * m.hidden_size * m.hidden_size + 2 * m.hidden_size * kv  # q, o; k, v
    mlp = 3 * m.hidden_size * m.intermediate_size  # gate, up, down
    norms = 2 * m.hidden_size
    embeddings = m.vocab_size * m.hidden_size
    head = 0 if m.tie_embeddings else m.vocab_size * m.hidden_size
    return embeddings + m.num_layers * (attention + mlp + norms) + m.hidden_size + head


def flops_per_token(m: ModelSpec, seq_len: int = None) -> int:
    """Training FLOPs per token: 6 x parameters + 6 x layers x hidden x seq_len (`seq_len`:
    the model's max_seq_len unless given), capped at what a run config accepts."""
    seq = m.max_seq_len if seq_len is None else seq_len
    return min(6 * parameter_count(m) + 6 * m.num_layers * m.hidden_size * seq,
               MAX_FLOPS_PER_TOKEN)


def tokens_per_pflop(flops: int) -> int:
    """The tokens_per_compute_point that makes one compute point one PFLOP (Pluralis's unit):
    ceil(1e15 / flops_per_token)."""
    return -(-10**15 // flops)
