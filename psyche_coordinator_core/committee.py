"""Who does what in a round: trainers, verifiers, witnesses, checkpointers, and the quorum.

Selection runs over the round's participants in index order: participant k is the k-th set bit
of `Round.participants`. Each role draws its members with `shuffle.draw_first`, seeded by the
round seed and a salt: the first `verifiers` drawn verify instead of training, the first
`expected_witnesses` drawn witness, the first `checkpointers` drawn checkpoint."""

from .constants import CHECKPOINTER_SALT, COMMITTEE_SALT, MAX_WITNESSES, WITNESS_SALT
from .shuffle import drawn_set, sha256
from .state import Committee, Round


def _shuffle_seed(rnd: Round, salt: bytes) -> bytes:
    return sha256(sha256(rnd.random_seed.to_bytes(8, "little")), salt)


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


def param_quorum(elected: int) -> int:
    """Witnesses that must commit one parameter hash for it to be agreed: a witness quorum that
    is also a strict majority, so that no two hashes can both reach it in a round."""
    return max(witness_quorum(elected), elected // 2 + 1)


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
    """The committee of one round. An election draws only as many as it elects (a quarter of
    256 verifiers is 16 hashes), and is cached by its seed."""

    def __init__(self, rnd: Round, witness_nodes: int, verification_percent: int,
                 checkpointer_percent: int = 0):
        self.round = rnd
        self.indices = rnd.participant_indices()
        self.n = n = len(self.indices)
        self.elected_witnesses = expected_witnesses(witness_nodes, n)
        self.verifiers = verifier_count(n, verification_percent)
        self.checkpointers = checkpointer_count(n, checkpointer_percent)

    def _drawn(self, salt: bytes, count: int) -> frozenset:
        """Ordinals of the participants elected under `salt`."""
        return drawn_set(_shuffle_seed(self.round, salt), self.n, count)

    def _elected(self, client_index: int, salt: bytes, count: int) -> bool:
        k = ordinal(self.round, client_index)
        return k is not None and k in self._drawn(salt, count)

    def is_witness(self, client_index: int) -> bool:
        return self._elected(client_index, WITNESS_SALT, self.elected_witnesses)

    def committee(self, client_index: int):
        k = ordinal(self.round, client_index)
        if k is None:
            return None
        if k in self._drawn(COMMITTEE_SALT, self.verifiers):
            return Committee.Verifier
        return Committee.Trainer

    def is_checkpointer(self, client_index: int) -> bool:
        if self.checkpointers == 0:
            return True
        return self._elected(client_index, CHECKPOINTER_SALT, self.checkpointers)

    def trainers(self) -> list:
        drawn = self._drawn(COMMITTEE_SALT, self.verifiers)
        return [i for k, i in enumerate(self.indices) if k not in drawn]

    def verifier_indices(self) -> list:
        drawn = self._drawn(COMMITTEE_SALT, self.verifiers)
        return [i for k, i in enumerate(self.indices) if k in drawn]

    def witness_indices(self) -> list:
        drawn = self._drawn(WITNESS_SALT, self.elected_witnesses)
        return [i for k, i in enumerate(self.indices) if k in drawn]
