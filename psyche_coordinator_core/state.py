"""Coordinator state: plain values that the operations in `coordinator.py` transform.

Clients and witnesses are immutable; a Round and the state itself are cloned before an
operation mutates them, so a rejected operation never touches the state it was given."""

from dataclasses import dataclass, field, replace
from enum import IntEnum

from .bloom import EMPTY_BLOOM
from .config import RunConfig
from .constants import LAYOUT_VERSION, MERKLE_ROOT_LEN, NUM_STORED_ROUNDS, ZERO_HASH


class RunState(IntEnum):
    Uninitialized = 0
    WaitingForMembers = 1
    Warmup = 2
    RoundTrain = 3
    RoundWitness = 4
    Cooldown = 5
    Finished = 6
    Paused = 7

    @property
    def halted(self) -> bool:
        return self in (RunState.Uninitialized, RunState.Finished, RunState.Paused)

    @property
    def active(self) -> bool:
        return self in (RunState.RoundTrain, RunState.RoundWitness, RunState.Cooldown)


class ClientState(IntEnum):
    Healthy = 0
    Dropped = 1  # removed by a health check
    Withdrawn = 2  # left (disconnect, pause, or an epoch without witnesses)
    Evicted = 3  # removed by a verifier quorum's evidence; cannot join again this epoch


class ClientPhase(IntEnum):
    """Where a client stands in joining (seed 002). Clients of an epoch's start are Active; a
    client that joins mid-epoch is Queued, then Syncing (replays applied results to the agreed
    parameters; no batches), then WarmingUp (trains, its results are witnessed but not applied),
    then Active."""
    Active = 0
    Queued = 1
    Syncing = 2
    WarmingUp = 3

    @property
    def trains(self) -> bool:
        return self in (ClientPhase.Active, ClientPhase.WarmingUp)


class CheckpointKind(IntEnum):
    Dummy = 0  # no source: the model is initialized from the run seed
    Hub = 1  # load from the checkpoint repo
    P2P = 2  # load from the peers that trained the last epoch
    Stored = 3  # load the snapshot recorded at `repo` in the run's store; check its `hash`


class Committee(IntEnum):
    Trainer = 0
    Verifier = 1


@dataclass(frozen=True)
class Checkpoint:
    kind: CheckpointKind = CheckpointKind.Dummy
    repo: str = ""  # Hub: the repository; a recorded snapshot: its location in the run's store
    revision: str = ""
    hash: bytes = ZERO_HASH  # parameter hash of the recorded snapshot; zero when none is
    step: int = 0  # the step the recorded snapshot's parameters train (see param_step)


@dataclass(frozen=True)
class Client:
    signer: bytes  # 32-byte ed25519 public key that signs this client's operations
    p2p_identity: bytes  # 32-byte key of its peer-to-peer endpoint
    state: ClientState = ClientState.Healthy
    phase: ClientPhase = ClientPhase.Active
    since: int = 0  # the step at which the current phase began
    # the contributor its points go to: the signer itself, or an identity that delegated to it
    identity: bytes = b""
    # points earned in this slot and not yet settled into the identity's ledger entry
    presence: int = 0  # rounds present (any phase)
    sequences: int = 0  # sequences trained and vouched for by a witness quorum
    # bitmask over `clients` indices: the elected verifiers that sent evidence against this
    # client's results (see `evidence`); zero whenever the slot is filled by a join
    accusers: int = 0

    def __post_init__(self):
        if not self.identity:
            object.__setattr__(self, "identity", self.signer)

    @property
    def unsettled(self) -> bool:
        return bool(self.presence or self.sequences)

    def with_state(self, state: ClientState) -> "Client":
        return replace(self, state=state)

    def with_phase(self, phase: ClientPhase, step: int) -> "Client":
        return replace(self, phase=phase, since=step)

    @property
    def trains(self) -> bool:
        """Healthy and in a phase that takes part in rounds (Active or WarmingUp)."""
        return self.state == ClientState.Healthy and self.phase.trains


@dataclass(frozen=True)
class Witness:
    index: int  # the witness's index in `clients`
    participant_bloom: bytes = EMPTY_BLOOM  # signers whose results it received and verified
    broadcast_bloom: bytes = EMPTY_BLOOM  # commitments of those results
    broadcast_merkle: bytes = bytes(MERKLE_ROOT_LEN)
    param_hash: bytes = ZERO_HASH  # the witness's parameters as it trains this step


@dataclass
class Round:
    height: int = 0  # rounds since the epoch started
    data_index: int = 0  # first sequence of this round's batch
    random_seed: int = 0
    participants: int = 0  # bitmask over `clients` indices: who takes part in this round
    warming: int = 0  # participants WarmingUp at the round's start: trained, never applied
    # trainers whose result of this round an elected verifier judged bad (`evidence`): left out
    # of the round's apply by every client (frozen when the round is final, see `evidence`)
    accused: int = 0
    witnesses: list = field(default_factory=list)

    def clone(self) -> "Round":
        return replace(self, witnesses=list(self.witnesses))

    def participant_indices(self) -> list:
        bits, out, i = self.participants, [], 0
        while bits:
            if bits & 1:
                out.append(i)
            bits >>= 1
            i += 1
        return out


@dataclass
class CoordinatorState:
    run_id: str
    config: RunConfig
    run_seed: int = 0
    run_state: RunState = RunState.Uninitialized
    run_state_start: int = 0  # unix seconds when run_state was entered
    epoch: int = 0
    step: int = 1  # the step the current (or next) round trains; step 1 is the first
    epoch_start_data_index: int = 0
    epoch_start_timestamp: int = 0
    start_step: int = 0  # step of the epoch's first round
    last_step: int = 0  # 0 until the epoch starts draining; then the step that ends it
    rounds_head: int = 0
    first_round: bool = True
    pending_pause: bool = False
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    # the latest parameter hash a witness quorum agreed on: the parameters that train param_step
    # (every step up to param_step - 2 applied); what snapshots and joiners are checked against
    param_hash: bytes = ZERO_HASH
    param_step: int = 0
    # the agreed hash at the latest multiple of checkpoint_interval: a mid-epoch snapshot point
    due_hash: bytes = ZERO_HASH
    due_step: int = 0
    # SHA-256 of the run spec's canonical bytes (what clients train: model, optimizer, data,
    # snapshot store, relays), set by the authority while halted; clients fetch the spec and
    # refuse one that does not hash to it. Zero: no spec, clients simulate training
    spec_hash: bytes = ZERO_HASH
    layout_version: int = LAYOUT_VERSION
    clients: list = field(default_factory=list)  # this epoch's clients; indices are stable
    pending: list = field(default_factory=list)  # joined for the next epoch
    rounds: list = field(default_factory=lambda: [Round() for _ in range(NUM_STORED_ROUNDS)])

    def clone(self) -> "CoordinatorState":
        return replace(self, clients=list(self.clients), pending=list(self.pending),
                       rounds=[r.clone() for r in self.rounds])

    @property
    def current_round(self) -> Round:
        return self.rounds[self.rounds_head]

    def round_back(self, k: int):
        """The round k rounds before the current one in this epoch, or None."""
        if self.current_round.height < k:
            return None
        return self.rounds[(self.rounds_head - k) % NUM_STORED_ROUNDS]

    def round_step(self, rnd: Round) -> int:
        return self.start_step + rnd.height

    def round_trains(self, rnd: Round) -> bool:
        """Whether trainers train in this round: not in the two drain rounds that end an epoch."""
        return self.last_step == 0 or self.round_step(rnd) < self.last_step - 2

    def client_index(self, signer: bytes):
        for i, c in enumerate(self.clients):
            if c.signer == signer:
                return i
        return None

    def pending_index(self, signer: bytes):
        for i, c in enumerate(self.pending):
            if c.signer == signer:
                return i
        return None

    def healthy_count(self) -> int:
        return sum(1 for c in self.clients if c.state == ClientState.Healthy)

    def _mask(self, keep) -> int:
        mask = 0
        for i, c in enumerate(self.clients):
            if keep(c):
                mask |= 1 << i
        return mask

    def training_count(self) -> int:
        """Clients that take part in rounds: what min_clients counts."""
        return sum(1 for c in self.clients if c.trains)

    def training_mask(self) -> int:
        return self._mask(lambda c: c.trains)

    def warming_mask(self) -> int:
        return self._mask(lambda c: c.trains and c.phase == ClientPhase.WarmingUp)

    def syncing_count(self) -> int:
        """Clients in a sync phase (Syncing or WarmingUp): what max_syncing bounds."""
        return sum(1 for c in self.clients if c.state == ClientState.Healthy
                   and c.phase in (ClientPhase.Syncing, ClientPhase.WarmingUp))

    def unsettled_count(self) -> int:
        """Slots holding points not yet settled: a new epoch cannot reuse the slots before."""
        return sum(1 for c in self.clients if c.unsettled)

    def member_count(self) -> int:
        """Distinct clients in the run now or next epoch: what max_clients bounds."""
        healthy = {c.signer for c in self.clients if c.state == ClientState.Healthy}
        return len(healthy) + sum(1 for c in self.pending if c.signer not in healthy)
