"""RunConfig: every knob of a run, validated with errors that name the field and its range."""

from dataclasses import asdict, dataclass, fields

from .constants import (
    MAX_CLIENTS,
    MAX_FLOPS_PER_TOKEN,
    MAX_SYNC_WARMUP_ROUNDS,
    MAX_TIME_SECONDS,
    MAX_WARMUP_TOKENS,
    MAX_WITNESSES,
)
from .errors import ConfigError

U8, U16, U32, U64 = (1 << 8) - 1, (1 << 16) - 1, (1 << 32) - 1, (1 << 64) - 1


@dataclass(frozen=True)
class RunConfig:
    """Times are whole seconds; batch sizes count sequences of `max_seq_len` tokens."""

    warmup_time: int = 30  # Warmup: clients load the model before the first round
    cooldown_time: int = 10  # Cooldown: checkpointers save/upload the model
    max_round_train_time: int = 30  # RoundTrain ends by this at the latest
    round_witness_time: int = 2  # RoundWitness: slack for late witnesses
    epoch_time: int = 600  # after this the epoch drains and ends
    global_batch_size_warmup_tokens: int = 0  # tokens over which batch size ramps start→end
    total_steps: int = 1000  # steps trained over the run's lifetime
    max_seq_len: int = 512  # tokens per sequence
    min_clients: int = 1  # below this an epoch ends
    init_min_clients: int = 1  # needed to start an epoch
    witness_nodes: int = 0  # witnesses per round; 0 = every client, capped at 32
    global_batch_size_start: int = 8
    global_batch_size_end: int = 8
    verification_percent: int = 0  # share of each round's clients elected to verify, not train
    checkpointer_percent: int = 0  # share elected to checkpoint at cooldown; 0 = anyone may
    waiting_for_members_extra_time: int = 3  # least time in WaitingForMembers before Warmup
    checkpoint_interval: int = 0  # also snapshot mid-epoch every this many steps; 0 = Cooldown only
    # joining a live run (seed 002)
    max_clients: int = MAX_CLIENTS  # capacity: a join beyond it is refused (RunFull)
    max_syncing: int = 0  # clients syncing at once, the rest queue; 0: joins wait for next epoch
    kept_rounds: int = 64  # rounds of applied results every client keeps for syncing peers
    sync_warmup_rounds: int = 2  # rounds a synced client trains before its results are applied
    # points (seed 002): presence per round present, compute per token trained and vouched for
    flops_per_token: int = 0  # training FLOPs per token, from the model's shape (0: unknown)
    tokens_per_compute_point: int = 1_000_000  # tokens trained and vouched that earn one point
    points_cap: int = 0  # the most points one identity may earn in the run; 0 = no cap
    presence_points: int = 1  # points for every round a client is present, in any phase
    # evidence: distinct elected verifiers whose evidence against a trainer's result evicts it
    evidence_quorum: int = 2
    # trainers' results each elected verifier judges a round (0: VERIFY_SAMPLE, 3). When the
    # verifiers' samples add up to more than the trainers, each result is judged by several, so
    # that a verifier colluding with a trainer cannot keep its result from every honest judge
    verify_sample: int = 0

    def validate(self) -> "RunConfig":
        """Raise ConfigError for the first field out of range; return self when valid."""

        def need(name, ok, allowed):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not ok(value):
                raise ConfigError(name, allowed, value)

        t = MAX_TIME_SECONDS
        need("epoch_time", lambda v: 1 <= v <= t, f"an integer in [1, {t}]")
        e = self.epoch_time
        need("warmup_time", lambda v: 0 <= v < e, f"an integer in [0, epoch_time) = [0, {e})")
        need("cooldown_time", lambda v: 1 <= v <= t, f"an integer in [1, {t}]")
        need("max_round_train_time", lambda v: 1 <= v < e,
             f"an integer in [1, epoch_time) = [1, {e})")
        need("round_witness_time", lambda v: 1 <= v <= t, f"an integer in [1, {t}]")
        need("global_batch_size_warmup_tokens", lambda v: 0 <= v <= MAX_WARMUP_TOKENS,
             f"an integer in [0, {MAX_WARMUP_TOKENS}]")
        need("total_steps", lambda v: 1 <= v <= U32 - 8, f"an integer in [1, {U32 - 8}]")
        need("max_seq_len", lambda v: 1 <= v <= U32, f"an integer in [1, {U32}]")
        need("min_clients", lambda v: 1 <= v <= MAX_CLIENTS, f"an integer in [1, {MAX_CLIENTS}]")
        m = self.min_clients
        need("init_min_clients", lambda v: m <= v <= MAX_CLIENTS,
             f"an integer in [min_clients, {MAX_CLIENTS}] = [{m}, {MAX_CLIENTS}]")
        w = min(m, MAX_WITNESSES)
        need("witness_nodes", lambda v: 0 <= v <= w,
             f"an integer in [0, min(min_clients, {MAX_WITNESSES})] = [0, {w}] (0 = all clients)")
        need("global_batch_size_start", lambda v: 1 <= v <= U16, f"an integer in [1, {U16}]")
        s = self.global_batch_size_start
        need("global_batch_size_end", lambda v: s <= v <= U16,
             f"an integer in [global_batch_size_start, {U16}] = [{s}, {U16}]")
        need("verification_percent", lambda v: 0 <= v <= 50, "an integer in [0, 50]")
        need("checkpointer_percent", lambda v: 0 <= v <= 100, "an integer in [0, 100]")
        need("waiting_for_members_extra_time", lambda v: 1 <= v <= U8, f"an integer in [1, {U8}]")
        n = self.total_steps
        need("checkpoint_interval", lambda v: 0 <= v <= n,
             f"an integer in [0, total_steps] = [0, {n}] (0 = only at Cooldown)")
        i = self.init_min_clients
        need("max_clients", lambda v: i <= v <= MAX_CLIENTS,
             f"an integer in [init_min_clients, {MAX_CLIENTS}] = [{i}, {MAX_CLIENTS}]")
        need("max_syncing", lambda v: 0 <= v <= MAX_CLIENTS,
             f"an integer in [0, {MAX_CLIENTS}] (0 = joins wait for the next epoch)")
        c = self.checkpoint_interval
        need("kept_rounds", lambda v: c <= v <= U16,
             f"an integer in [checkpoint_interval, {U16}] = [{c}, {U16}]")
        need("sync_warmup_rounds", lambda v: 0 <= v <= MAX_SYNC_WARMUP_ROUNDS,
             f"an integer in [0, {MAX_SYNC_WARMUP_ROUNDS}]")
        need("flops_per_token", lambda v: 0 <= v <= MAX_FLOPS_PER_TOKEN,
             f"an integer in [0, {MAX_FLOPS_PER_TOKEN}] (0 = unknown)")
        need("tokens_per_compute_point", lambda v: 1 <= v <= U64, f"an integer in [1, {U64}]")
        need("points_cap", lambda v: 0 <= v <= U64, f"an integer in [0, {U64}] (0 = no cap)")
        need("presence_points", lambda v: 0 <= v <= U32, f"an integer in [0, {U32}]")
        need("evidence_quorum", lambda v: 1 <= v <= MAX_CLIENTS,
             f"an integer in [1, {MAX_CLIENTS}]")
        need("verify_sample", lambda v: 0 <= v <= U8, f"an integer in [0, {U8}] (0 = 3)")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        """Build from a mapping (a TOML table); unknown keys are an error, missing keys default."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(unknown[0], f"one of the known fields ({', '.join(sorted(known))})",
                              data[unknown[0]])
        return cls(**data).validate()
