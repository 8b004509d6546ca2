"""Which sequences each trainer trains in a round, from the round seed alone.

A round's batch is the sequence range [data_index, data_index + batch_size). Trainers (in index
order) are shuffled by an LCG Fisher-Yates seeded with the round seed; walking that order, trainer
i takes base + (1 if i < remainder else 0) consecutive sequences. Verifiers judge the trainers'
results in a seeded order (`verification_sample`)."""

from dataclasses import dataclass

from .committee import RoundCommittee
from .config import RunConfig
from .constants import VERIFY_SAMPLE
from .shuffle import lcg_shuffle
from .state import Round


@dataclass(frozen=True, order=True)
class BatchId:
    """Inclusive range of sequence indices [start, end]."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __str__(self) -> str:
        return f"B[{self.start}, {self.end}]"


def batch_size(config: RunConfig, tokens: int) -> int:
    """Sequences in the global batch once `tokens` tokens have been trained (linear ramp)."""
    start, end, ramp = (config.global_batch_size_start, config.global_batch_size_end,
                        config.global_batch_size_warmup_tokens)
    if ramp == 0 or tokens >= ramp:
        return end
    # round-half-up of start + (end - start) * tokens / ramp, in integers
    return start + ((end - start) * tokens * 2 + ramp) // (2 * ramp)


def round_batch_size(config: RunConfig, rnd: Round) -> int:
    return batch_size(config, rnd.data_index * config.max_seq_len)


def assign_batches(config: RunConfig, rnd: Round, committee: RoundCommittee = None) -> dict:
    """{client_index: BatchId} for every trainer with a non-empty share of the round's batch."""
    committee = committee or RoundCommittee(rnd, config.witness_nodes, config.verification_percent)
    trainers = lcg_shuffle(committee.trainers(), rnd.random_seed)
    if not trainers:
        return {}
    total = round_batch_size(config, rnd)
    base, rem = divmod(total, len(trainers))
    out, start = {}, rnd.data_index
    for i, client in enumerate(trainers):
        size = base + (1 if i < rem else 0)
        if size:
            out[client] = BatchId(start, start + size - 1)
            start += size
    return out


def _verify_order(rnd: Round, batches: dict) -> list:
    """The round's trainers in the order verifiers are given them: a reversed seeded shuffle."""
    return list(reversed(lcg_shuffle(sorted(batches), rnd.random_seed ^ 0x5645524946590000)))


def _sample_size(config: RunConfig) -> int:
    """Results each verifier judges: the config's `verify_sample`, 0 meaning VERIFY_SAMPLE."""
    return config.verify_sample or VERIFY_SAMPLE


def assign_verifications(config: RunConfig, rnd: Round, committee: RoundCommittee = None) -> dict:
    """{verifier_index: BatchId}: the batch of the first trainer of each verifier's
    `verification_sample`."""
    committee = committee or RoundCommittee(rnd, config.witness_nodes, config.verification_percent)
    batches = assign_batches(config, rnd, committee)
    order = _verify_order(rnd, batches)
    if not order:
        return {}
    s = _sample_size(config)
    return {v: batches[order[j * s % len(order)]]
            for j, v in enumerate(committee.verifier_indices())}


def verification_sample(config: RunConfig, rnd: Round, verifier: int,
                        committee: RoundCommittee = None) -> list:
    """The trainers (client indices) elected verifier `verifier` judges this round, and the only
    ones its evidence may name: with s = verify_sample (0: VERIFY_SAMPLE) and n trainers in the
    verification order, the j-th verifier (in index order) takes the min(s, n) positions from
    j * s on, around the order: the verifiers' samples lie end to end, so every result is
    judged by floor(m * s / n) or one more of the m verifiers. [] for a non-verifier."""
    committee = committee or RoundCommittee(rnd, config.witness_nodes, config.verification_percent)
    verifiers = committee.verifier_indices()
    order = _verify_order(rnd, assign_batches(config, rnd, committee))
    if verifier not in verifiers or not order:
        return []
    j, n, s = verifiers.index(verifier), len(order), _sample_size(config)
    return [order[(j * s + t) % n] for t in range(min(s, n))]
