"""Pure Python core of the Psyche coordinator: config, state, operations, committee selection,
data assignment, witness blooms and the canonical state bytes. No I/O, no clock, no randomness
but the run seed."""

from .assignment import (
    BatchId,
    assign_batches,
    assign_verifications,
    batch_size,
    round_batch_size,
    verification_sample,
)
from .bloom import WitnessBloom, bloom_contains, bloom_of
from .canonical import STATE_SIZE, LayoutError, from_bytes, state_hash, to_bytes
from .committee import RoundCommittee, expected_witnesses, param_quorum, witness_quorum
from .config import RunConfig
from .coordinator import (
    OPERATIONS,
    apply,
    is_healthy,
    new_run,
    round_seed,
    tick_deadline,
    trainer_score,
)
from .errors import ConfigError, CoordinatorError
from .points import Credit, Points, credit, pending_credit, ranked, with_unsettled
from .state import (
    Checkpoint,
    CheckpointKind,
    Client,
    ClientPhase,
    ClientState,
    Committee,
    CoordinatorState,
    Round,
    RunState,
    Witness,
)

__all__ = [
    "BatchId", "Checkpoint", "Credit", "Points", "credit", "pending_credit", "ranked",
    "with_unsettled", "CheckpointKind", "Client", "ClientPhase", "ClientState", "Committee",
    "ConfigError",
    "CoordinatorError", "CoordinatorState", "LayoutError", "OPERATIONS", "Round", "RoundCommittee",
    "RunConfig", "RunState", "STATE_SIZE", "Witness", "WitnessBloom", "apply", "assign_batches",
    "assign_verifications", "batch_size", "bloom_contains", "bloom_of", "expected_witnesses",
    "from_bytes", "is_healthy", "new_run", "param_quorum", "round_batch_size", "round_seed",
    "state_hash",
    "tick_deadline", "to_bytes", "trainer_score", "verification_sample", "witness_quorum",
]
