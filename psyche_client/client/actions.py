"""What ClientStateMachine asks the daemon to do: one frozen dataclass per kind of action.

The machine returns lists of these; the daemon matches on the class (`match act: case Send(op,
args): ...`) and carries them out, feeding any answer back to the machine."""

from dataclasses import dataclass

from psyche_coordinator_core import BatchId

from .results import TrainingResult


@dataclass(frozen=True)
class Send:
    """An operation to the coordinator; its answer goes back through op_finished."""
    op: str  # the core's operation name: join, tick, warmup_witness, witness, health_check,
    # checkpoint, synced, resync
    args: dict  # the operation's arguments, as the core's apply() takes them


@dataclass(frozen=True)
class Prepare:
    """Load the model for this epoch, then call model_ready(epoch)."""
    epoch: int


@dataclass(frozen=True)
class Apply:
    """Apply a round's consensus results, before any later training."""
    step: int
    results: list  # [TrainingResult] a quorum of witnesses vouched for, in batch order


@dataclass(frozen=True)
class LoadBase:
    """A client joining mid-epoch (or lagging with no base yet): download the run's recorded
    snapshot (checkpoint.hash nonzero; its hash checked), else the run seed's model (kind
    Dummy, labelled step 1), keep it as the base to replay from, and call base_ready(step,
    hash), or base_failed(why)."""


@dataclass(frozen=True)
class ResetToBase:
    """A lagging client: put the kept base back (no download) and call base_ready(step,
    hash)."""


@dataclass(frozen=True)
class FetchApplied:
    """Ask the peers for their applied set of `step` and call fetched(step, set, peer) (set
    and peer None when no peer holds it); `exclude`: peers whose sets gave another hash."""
    step: int
    exclude: frozenset = frozenset()


@dataclass(frozen=True)
class FetchResults:
    """Ask the peers for the results of `step` they hold (final or not) and hand each to
    on_result: a client's first round as a participant, whose witnesses vouch for the round
    before it, which it saw only in part."""
    step: int


@dataclass(frozen=True)
class Validate:
    """Check a peer's result against the run's model (its payload decodes to the model's
    layout, finite, not all zeros) and call validated(result, why, fingerprint): why '' when
    it may be vouched for. In arrival order, beside the training."""
    result: TrainingResult


@dataclass(frozen=True)
class Verify:
    """An elected verifier judges a peer's result of `step` with the loss-improvement test
    (against `compare`, another batch of the round; at the lookahead of `previous`, the
    trainer's result of `step - 1` when it trained that step; the overlap with `last`, its last
    result before `step` with no batch between), in the worker after the applies asked for
    before it, and calls verified(step, result, bad, detail)."""
    step: int
    result: TrainingResult
    compare: BatchId
    previous: TrainingResult | None = None
    last: TrainingResult | None = None


@dataclass(frozen=True)
class Train:
    """Train the batch, then call trained(step, result)."""
    step: int
    batch: BatchId


@dataclass(frozen=True)
class Evaluate:
    """The held-out loss, once per epoch at Cooldown, after the apply of `step`."""
    epoch: int
    step: int


@dataclass(frozen=True)
class Snapshot:
    """Every round of the epoch is applied: keep the parameters, which the next epoch starts
    training at `step` from, for clients that join later."""
    step: int


@dataclass(frozen=True)
class StoreSnapshot:
    """Capture the parameters once every apply asked for so far is done (they train `step`),
    write them as a snapshot of `epoch` labelled `step` and, when `upload`, store it in the
    run's snapshot store and call snapshot_stored(step, param hash, location)."""
    epoch: int
    step: int
    upload: bool  # False: only kept on this machine (--checkpoint-dir)


@dataclass(frozen=True)
class PruneSnapshots:
    """A snapshot was recorded: keep only the run's last few in the store."""


@dataclass(frozen=True)
class Publish:
    """Send this client's training result to every peer."""
    result: TrainingResult


@dataclass(frozen=True)
class Log:
    """Something worth telling the operator."""
    text: str


Action = (Send | Prepare | LoadBase | ResetToBase | FetchApplied | FetchResults | Apply | Validate
          | Verify | Train | Evaluate | Snapshot | StoreSnapshot | PruneSnapshots | Publish | Log)
