"""Who does what in a round: trainers, verifiers, witnesses, checkpointers, and the quorum.

Selection runs over the round's participants in index order: participant k (the k-th set bit
of `Round.participants`) has position perm[k] in a swap-or-not shuffle seeded by the round seed
and a salt. Low positions win: the first `verifiers` positions verify instead of training, the
first `expected_witnesses` positions witness."""

from .constants import CHECKPOINTER_SALT, COMMITTEE_SALT, MAX_WITNESSES, WITNESS_SALT
from .shuffle import sha256, swap_or_not_permutation
from .state import Committee, Round


def _positions(rnd: Round, salt: bytes) -> tuple:
    n = bin(rnd.participants).count("1")
    if n == 0:
        return ()
    base = sha256(rnd.random_seed.to_bytes(8, "little"))
    return swap_or_not_permutation(sha256(base, salt), n)


def expected_witnesses(witness_nodes: int, participants: int) -> int:
    """Witnesses elected for a round of `participants` clients."""
    wanted = witness_nodes if witness_nodes else MAX_WITNESSES
    return min(wanted, participants)


def witness_quorum(elected: int) -> int:
    """Witnesses that must agree: all of 1 or 2, 2 of 3, otherwise two thirds rounded down."""
    if elected <= 2:
        return elected
    if elected == 3:
        return 2
    return max(1, elected * 2 // 3)


def verifier_count(participants: int, verification_percent: int) -> int:
    return participants * verification_percent // 100


def checkpointer_count(participants: int, checkpointer_percent: int) -> int:
    """0 means nobody is elected and any client may checkpoint."""
    if checkpointer_percent == 0 or participants == 0:
        return 0
    return max(1, -(-participants * checkpointer_percent // 100))


def ordinal(rnd: Round, client_index: int):
    """k such that client_index is the k-th participant of the round, or None."""
    if client_index < 0 or not (rnd.participants >> client_index) & 1:
        return None
    return bin(rnd.participants & ((1 << client_index) - 1)).count("1")


class RoundCommittee:
    """The committee of one round, computed once."""

    def __init__(self, rnd: Round, witness_nodes: int, verification_percent: int,
                 checkpointer_percent: int = 0):
        self.round = rnd
        self.indices = rnd.participant_indices()
        n = len(self.indices)
        self.elected_witnesses = expected_witnesses(witness_nodes, n)
        self.verifiers = verifier_count(n, verification_percent)
        self.checkpointers = checkpointer_count(n, checkpointer_percent)
        self._witness_pos = _positions(rnd, WITNESS_SALT)
        self._committee_pos = _positions(rnd, COMMITTEE_SALT)
        self._checkpointer_pos = _positions(rnd, CHECKPOINTER_SALT) if self.checkpointers else ()

    def is_witness(self, client_index: int) -> bool:
        k = ordinal(self.round, client_index)
        return k is not None and self._witness_pos[k] < self.elected_witnesses

    def committee(self, client_index: int):
        k = ordinal(self.round, client_index)
        if k is None:
            return None
        return Committee.Verifier if self._committee_pos[k] < self.verifiers else Committee.Trainer

    def is_checkpointer(self, client_index: int) -> bool:
        if self.checkpointers == 0:
            return True
        k = ordinal(self.round, client_index)
        return k is not None and self._checkpointer_pos[k] < self.checkpointers

    def trainers(self) -> list:
        return [i for k, i in enumerate(self.indices) if self._committee_pos[k] >= self.verifiers]

    def verifier_indices(self) -> list:
        return [i for k, i in enumerate(self.indices) if self._committee_pos[k] < self.verifiers]

    def witness_indices(self) -> list:
        return [i for k, i in enumerate(self.indices) if self._witness_pos[k] < self.elected_witnesses]
