"""Contributor points: the ledger entry of one identity, and how a slot's points credit it.

The coordinator state holds, per client slot, the rounds it was present and the sequences it
trained that a witness quorum vouched for (`coordinator._credit_round`). Those counters are
bounded (one per slot); the totals per contributor identity are not, so they live outside the
state: in a per-contributor account on chain, in the server's ledger off chain. `settle` moves a
slot's counters out; `credit` adds them to the identity's entry at the run's rates. Both run in
one transaction (the program's `settle_points`, the server's lock), so nothing is counted twice
or lost.

Every figure is an unsigned 64-bit integer that saturates instead of wrapping, as on chain."""

from dataclasses import dataclass, replace

from .config import RunConfig
from .errors import CoordinatorError
from .state import CoordinatorState

U64 = (1 << 64) - 1


def _add(a: int, b: int) -> int:
    return min(a + b, U64)


def _mul(a: int, b: int) -> int:
    return min(a * b, U64)


@dataclass(frozen=True)
class Credit:
    """What one slot's settlement moves: the points its identity earned through it."""

    identity: bytes
    presence: int  # rounds present
    sequences: int  # sequences trained and vouched for


@dataclass(frozen=True)
class Points:
    """One contributor identity's points in one run, summed over all its node keys."""

    identity: bytes
    presence_rounds: int = 0  # rounds present, any phase
    sequences: int = 0  # sequences trained and vouched for by a witness quorum
    tokens: int = 0  # those sequences' tokens (max_seq_len each, at the time)
    token_carry: int = 0  # tokens toward the next compute point (< tokens_per_compute_point)
    presence_points: int = 0
    compute_points: int = 0

    @property
    def total(self) -> int:
        return _add(self.presence_points, self.compute_points)

    def flops(self, config: RunConfig) -> int:
        """Training FLOPs of its tokens, estimated from the model's shape (0 when unknown).
        Exact (Python integers); a display figure, never stored."""
        return self.tokens * config.flops_per_token


def pending_credit(s: CoordinatorState, index: int) -> Credit:
    """The credit `settle(index)` moves (read it before applying the settle)."""
    if type(index) is not int or not 0 <= index < len(s.clients):
        raise CoordinatorError("InvalidClientIndex", f"no client at index {index!r}")
    c = s.clients[index]
    return Credit(c.identity, c.presence, c.sequences)


def credit(entry: Points, c: Credit, config: RunConfig) -> Points:
    """`entry` (None: a new identity) with a settled credit added at the run's rates. Presence
    points come first, then compute points; together they stop at `points_cap` (0: no cap). The
    counts (rounds, sequences, tokens) always grow: they are what was done, the points what it
    earned."""
    if entry is None:
        entry = Points(c.identity)
    if entry.identity != c.identity:
        raise CoordinatorError("InvalidOperation", "the credit is for another identity")
    tokens = _mul(c.sequences, config.max_seq_len)
    room = U64 if config.points_cap == 0 else max(config.points_cap - entry.total, 0)
    presence = min(_mul(c.presence, config.presence_points), room)
    carry = _add(entry.token_carry, tokens)
    compute = min(carry // config.tokens_per_compute_point, room - presence)
    return replace(
        entry,
        presence_rounds=_add(entry.presence_rounds, c.presence),
        sequences=_add(entry.sequences, c.sequences),
        tokens=_add(entry.tokens, tokens),
        token_carry=carry % config.tokens_per_compute_point,
        presence_points=_add(entry.presence_points, presence),
        compute_points=_add(entry.compute_points, compute),
    )


def with_unsettled(ledger: dict, s: CoordinatorState) -> dict:
    """The ledger {identity: Points} as it will be once every slot of `s` is settled: what a
    leaderboard shows while an epoch runs."""
    out = dict(ledger)
    for i, c in enumerate(s.clients):
        if c.unsettled:
            out[c.identity] = credit(out.get(c.identity), pending_credit(s, i), s.config)
    return out


def ranked(ledger: dict) -> list:
    """[(rank, Points)] by total points, most first; ties share a rank, listed by identity."""
    entries = sorted(ledger.values(), key=lambda p: (-p.total, p.identity))
    out, rank = [], 0
    for n, p in enumerate(entries):
        if n == 0 or p.total != entries[n - 1].total:
            rank = n + 1
        out.append((rank, p))
    return out
