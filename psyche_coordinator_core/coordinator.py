"""The coordinator state machine: a pure function of (state, time, operation).

`apply(state, now, op, **args)` returns the next state or raises CoordinatorError, leaving the
given state untouched. `now` is unix seconds supplied by the backend (server clock, or the Clock
sysvar on chain); randomness comes only from the run seed mixed with epoch, step and time."""

from dataclasses import replace

from .assignment import assign_batches, round_batch_size, verification_sample
from .bloom import bloom_contains, check_bloom_bytes
from .committee import RoundCommittee, expected_witnesses, param_quorum, witness_quorum
from .config import RunConfig
from .constants import (
    LAYOUT_VERSION,
    MAX_CLIENTS,
    MAX_WITNESSES,
    MERKLE_ROOT_LEN,
    PARAM_HASH_LEN,
    REPO_LEN,
    ROUND_SEED_DOMAIN,
    RUN_ID_LEN,
    ZERO_HASH,
)
from .errors import CoordinatorError
from .shuffle import sha256, u64_le
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

U64 = (1 << 64) - 1


def new_run(run_id: str, config: RunConfig, run_seed: int,
            checkpoint: Checkpoint = Checkpoint()) -> CoordinatorState:
    """A run as its creator makes it: Uninitialized until resumed."""
    raw = run_id.encode("utf-8") if isinstance(run_id, str) else b""
    if not raw or len(raw) > RUN_ID_LEN or b"\0" in raw:
        raise CoordinatorError("InvalidRunId", f"run id must be 1 to {RUN_ID_LEN} bytes of UTF-8")
    if not 0 <= run_seed < 1 << 64:
        raise CoordinatorError("InvalidOperation", "run_seed must fit in u64")
    return CoordinatorState(run_id=run_id, config=config.validate(), run_seed=run_seed,
                            checkpoint=_check_checkpoint(checkpoint))


def apply(state: CoordinatorState, now: int, op: str, **args) -> CoordinatorState:
    handler = OPERATIONS.get(op)
    if handler is None:
        raise CoordinatorError("InvalidOperation", f"unknown operation {op!r}")
    if type(now) is not int or not 0 <= now < 1 << 63:
        raise CoordinatorError("InvalidOperation", "time must be a non-negative integer")
    if state.layout_version != LAYOUT_VERSION:
        raise CoordinatorError("LayoutVersionMismatch",
                               f"the run's account has layout version {state.layout_version}, "
                               f"this coordinator reads version {LAYOUT_VERSION}")
    nxt = state.clone()
    handler(nxt, now, **args)
    return nxt


# ---------------------------------------------------------------- time and phase changes

def _timed_out(s: CoordinatorState, now: int, duration: int) -> bool:
    # at least one second must pass even for a zero duration, as in Psyche
    return now != s.run_state_start and now >= s.run_state_start + duration


def _change_state(s: CoordinatorState, now: int, to: RunState) -> None:
    assert s.run_state != to, to
    s.run_state = to
    s.run_state_start = now


def round_seed(s: CoordinatorState, now: int) -> int:
    return u64_le(sha256(ROUND_SEED_DOMAIN, s.run_seed.to_bytes(8, "little"),
                         s.epoch.to_bytes(4, "little"), s.step.to_bytes(4, "little"),
                         now.to_bytes(8, "little")))


def _start_waiting_for_members(s, now):
    _change_state(s, now, RunState.Finished if s.step > s.config.total_steps
                  else RunState.WaitingForMembers)


def _start_epoch(s: CoordinatorState, now: int) -> None:
    previous = {c.signer for c in s.clients if c.state == ClientState.Healthy}
    joining, s.pending = s.pending[:MAX_CLIENTS], s.pending[MAX_CLIENTS:]
    if s.checkpoint.kind == CheckpointKind.P2P and not any(c.signer in previous for c in joining):
        # nobody who holds last epoch's model is here: fall back to the recorded snapshot, else
        # the Hub repository, else the run seed (which clients refuse past the first step)
        if s.checkpoint.hash != ZERO_HASH:
            kind = CheckpointKind.Stored
        else:
            kind = CheckpointKind.Hub if s.checkpoint.repo else CheckpointKind.Dummy
        s.checkpoint = replace(s.checkpoint, kind=kind)
    s.clients = [Client(c.signer, c.p2p_identity, since=s.step, identity=c.identity)
                 for c in joining]
    s.rounds = [Round() for _ in s.rounds]
    s.rounds_head = 0
    s.first_round = True
    s.start_step = s.step
    s.last_step = 0
    s.epoch_start_timestamp = now
    _change_state(s, now, RunState.Warmup)


def _set_phase(s: CoordinatorState, index: int, phase: ClientPhase) -> None:
    s.clients[index] = s.clients[index].with_phase(phase, s.step)


def _promote_queued(s: CoordinatorState) -> None:
    """Queued clients start syncing, first come first served, while max_syncing allows."""
    while s.syncing_count() < s.config.max_syncing:
        queued = [(c.since, i) for i, c in enumerate(s.clients)
                  if c.state == ClientState.Healthy and c.phase == ClientPhase.Queued]
        if not queued:
            return
        _set_phase(s, min(queued)[1], ClientPhase.Syncing)


def _start_round_train(s: CoordinatorState, now: int) -> None:
    # a client synced during round w warms up in rounds w+1..w+K, and is Active from w+K+1
    warm = s.config.sync_warmup_rounds
    for i, c in enumerate(s.clients):
        if c.trains and c.phase == ClientPhase.WarmingUp and s.step >= c.since + warm + 1:
            _set_phase(s, i, ClientPhase.Active)
    _promote_queued(s)
    if s.first_round:
        head, height, data_index = 0, 0, s.epoch_start_data_index
    else:
        prev = s.current_round
        head = (s.rounds_head + 1) % len(s.rounds)
        height = prev.height + 1
        data_index = prev.data_index + round_batch_size(s.config, prev)
    s.rounds_head = head
    s.rounds[head] = Round(height=height, data_index=data_index, random_seed=round_seed(s, now),
                           participants=s.training_mask(), warming=s.warming_mask())
    _change_state(s, now, RunState.RoundTrain)


def _warmup_ready(s: CoordinatorState) -> bool:
    """Enough clients to train, and every one (up to 32) has said its model is loaded. Warmup
    witnesses of clients that left (or went back to syncing) since do not count."""
    training = s.training_count()
    ready = sum(1 for w in s.current_round.witnesses if s.clients[w.index].trains)
    return training >= s.config.min_clients and ready >= min(training, MAX_WITNESSES)


def _drop_unready(s: CoordinatorState) -> None:
    """Warmup timed out: clients that never said their model is loaded (killed, crashed, cut
    off, too slow) are dropped instead of holding rounds they cannot train; they may join again
    (mid-epoch, when the run allows it)."""
    ready = {w.index for w in s.current_round.witnesses}
    dropped = set()
    for i, c in enumerate(s.clients):
        if c.trains and i not in ready:
            s.clients[i] = c.with_state(ClientState.Dropped)
            dropped.add(c.signer)
    s.pending = [c for c in s.pending if c.signer not in dropped]


def _withdraw_all(s: CoordinatorState) -> None:
    s.clients = [c.with_state(ClientState.Withdrawn) if c.state == ClientState.Healthy else c
                 for c in s.clients]


def _credit_round(s: CoordinatorState) -> None:
    """Points for the round that ends: presence for every healthy client in any phase (queued and
    syncing included, seed 002), and compute for the sequences of the round before it whose
    results this round's witnesses vouch for (a witness quorum received them; warming-up
    trainers included; evicted ones not). A slot holds them until they are settled into its
    identity's entry."""
    cur = s.current_round
    for i, c in enumerate(s.clients):
        if c.state == ClientState.Healthy:
            s.clients[i] = replace(c, presence=min(c.presence + 1, U64))
    trained = s.round_back(1)
    if trained is None or not s.round_trains(trained) or not cur.witnesses:
        return
    elected = expected_witnesses(s.config.witness_nodes, len(cur.participant_indices()))
    quorum = witness_quorum(elected)
    for index, batch in sorted(assign_batches(s.config, trained).items()):
        c = s.clients[index]
        # an evicted slot's points are forfeited, the batch it was accused over included
        if c.state != ClientState.Evicted and trainer_score(s, cur, c.signer) >= quorum:
            s.clients[index] = replace(c, sequences=min(c.sequences + len(batch), U64))


def _end_round(s: CoordinatorState, now: int) -> None:
    cfg, cur = s.config, s.current_round
    _credit_round(s)
    s.first_round = False
    s.step += 1
    if not cur.witnesses:
        # nobody witnessed: the witnesses left or everyone did; the epoch cannot go on
        _withdraw_all(s)
        _change_state(s, now, RunState.Cooldown)
        return
    epoch_over = now >= s.epoch_start_timestamp + cfg.epoch_time
    if s.last_step == 0 and (epoch_over or s.step > cfg.total_steps):
        # drain: two more rounds without training witness and apply the last results
        s.last_step = s.step + 2
    elected = expected_witnesses(cfg.witness_nodes, len(cur.participant_indices()))
    if ((s.last_step and s.step >= s.last_step) or s.training_count() < cfg.min_clients
            or len(cur.witnesses) < witness_quorum(elected) or s.pending_pause):
        _change_state(s, now, RunState.Cooldown)
    else:
        _start_round_train(s, now)


def _end_epoch(s: CoordinatorState, now: int) -> None:
    cur = s.current_round
    s.epoch_start_data_index = cur.data_index + round_batch_size(s.config, cur)
    s.epoch += 1
    if s.checkpoint.kind != CheckpointKind.P2P:
        # the epoch's clients now hold the newest model; joiners fetch it from them
        s.checkpoint = replace(s.checkpoint, kind=CheckpointKind.P2P)
    if s.pending_pause:
        _withdraw_all(s)
        s.pending_pause = False
        _change_state(s, now, RunState.Paused)
    else:
        _start_waiting_for_members(s, now)


# ---------------------------------------------------------------- operations

def _require_running(s: CoordinatorState) -> None:
    if s.run_state.halted:
        raise CoordinatorError("Halted", f"run is {s.run_state.name}")


def _require_round(s: CoordinatorState, what: str) -> None:
    """Witnesses and health checks belong to a round: RoundTrain or RoundWitness."""
    _require_running(s)
    if s.run_state not in (RunState.RoundTrain, RunState.RoundWitness):
        raise CoordinatorError("InvalidRunState", f"{what} during {s.run_state.name}")


def tick(s: CoordinatorState, now: int) -> None:
    _require_running(s)
    cfg, st = s.config, s.run_state
    if st == RunState.WaitingForMembers:
        # the new epoch reuses the slots: the points they hold are settled first
        if (len(s.pending) >= cfg.init_min_clients and not s.unsettled_count()
                and _timed_out(s, now, cfg.waiting_for_members_extra_time)):
            _start_epoch(s, now)
    elif st == RunState.Warmup:
        if _timed_out(s, now, cfg.warmup_time):
            _drop_unready(s)
        if s.training_count() < cfg.min_clients:
            _start_waiting_for_members(s, now)
        elif _timed_out(s, now, cfg.warmup_time) or _warmup_ready(s):
            # ready: the last client not yet ready may have left since the last warmup witness
            _start_round_train(s, now)
    elif st == RunState.RoundTrain:
        if _timed_out(s, now, cfg.max_round_train_time):
            _change_state(s, now, RunState.RoundWitness)
    elif st == RunState.RoundWitness:
        if _timed_out(s, now, cfg.round_witness_time):
            _end_round(s, now)
    elif st == RunState.Cooldown:
        if _timed_out(s, now, cfg.cooldown_time):
            _end_epoch(s, now)


def _key(value, name: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise CoordinatorError("InvalidOperation", f"{name} must be 32 bytes")
    return bytes(value)


def _require_room(s: CoordinatorState, signer: bytes) -> None:
    i = s.client_index(signer)
    if i is not None and s.clients[i].state == ClientState.Healthy:
        return  # already counted: a client of this epoch joining for the next one
    if s.member_count() >= s.config.max_clients:
        raise CoordinatorError("RunFull", f"the run is full: {s.member_count()} of "
                               f"{s.config.max_clients} clients")


def _joins_mid_epoch(s: CoordinatorState, signer: bytes) -> bool:
    if s.config.max_syncing == 0 or s.run_state not in (RunState.Warmup, RunState.RoundTrain,
                                                        RunState.RoundWitness):
        return False
    i = s.client_index(signer)
    return i is None or s.clients[i].state != ClientState.Healthy


def join(s: CoordinatorState, now: int, signer: bytes, p2p_identity: bytes,
         identity: bytes = None) -> None:
    """Join the run. During an epoch's Warmup or rounds (when max_syncing allows joins mid-epoch)
    a newcomer enters this epoch Queued and syncs when the queue lets it; otherwise, and for a
    client of this epoch, the join is for the next epoch. One join covers one epoch.
    `identity` is the contributor the client's points go to (default: the signer); the backend
    has checked that the identity delegated to the signer."""
    signer, p2p_identity = _key(signer, "signer"), _key(p2p_identity, "p2p_identity")
    identity = signer if identity is None else _key(identity, "identity")
    if s.run_state == RunState.Finished:
        raise CoordinatorError("RunFinished", "the run has finished")
    i = s.client_index(signer)
    if i is not None and s.clients[i].state == ClientState.Evicted:
        raise CoordinatorError("Evicted", f"client {i} was evicted by its verifiers' evidence: "
                               "it may join again once the next epoch starts")
    if s.pending_index(signer) is not None:
        raise CoordinatorError("AlreadyJoined", "already joined for the next epoch")
    _require_room(s, signer)
    if _joins_mid_epoch(s, signer):
        if s.member_count() >= s.config.global_batch_size_end:
            raise CoordinatorError("MoreClientsThanBatches",
                                   "more clients than sequences in a batch would leave some idle")
        queued = Client(signer, p2p_identity, ClientState.Healthy, ClientPhase.Queued, s.step,
                        identity)
        i = s.client_index(signer)
        if i is not None:
            # it left or was dropped this epoch: back at the queue's tail, in the same slot with
            # the points it holds, which stay its old identity's
            old = s.clients[i]
            if old.unsettled and old.identity != identity:
                raise CoordinatorError("PointsUnsettled", f"slot {i} holds points of another "
                                       "identity: settle them before joining as a new one")
            s.clients[i] = replace(queued, presence=old.presence, sequences=old.sequences)
        elif len(s.clients) >= MAX_CLIENTS:
            raise CoordinatorError("ClientsFull", f"{MAX_CLIENTS} clients in this epoch already")
        else:
            s.clients.append(queued)
        _promote_queued(s)
        return
    if len(s.pending) >= MAX_CLIENTS:
        raise CoordinatorError("ClientsFull", f"{MAX_CLIENTS} clients are already waiting")
    if len(s.pending) >= s.config.global_batch_size_end:
        raise CoordinatorError("MoreClientsThanBatches",
                               "more clients than sequences in a batch would leave some idle")
    s.pending.append(Client(signer, p2p_identity, identity=identity))


def withdraw(s: CoordinatorState, now: int, signer: bytes) -> None:
    """Leave: drop out of the next epoch and, if healthy in this one, out of it too."""
    signer = _key(signer, "signer")
    if s.run_state == RunState.Finished:
        raise CoordinatorError("RunFinished", "the run has finished")
    found = False
    p = s.pending_index(signer)
    if p is not None:
        del s.pending[p]
        found = True
    i = s.client_index(signer)
    if i is not None and s.clients[i].state == ClientState.Healthy:
        s.clients[i] = s.clients[i].with_state(ClientState.Withdrawn)
        found = True
    if not found:
        raise CoordinatorError("InvalidWithdraw", "not a healthy client nor waiting to join")


def _sender(s: CoordinatorState, signer, index) -> int:
    signer = _key(signer, "signer")
    if not isinstance(index, int) or not 0 <= index < len(s.clients):
        raise CoordinatorError("InvalidClientIndex", f"no client at index {index!r}")
    c = s.clients[index]
    if c.signer != signer or c.state != ClientState.Healthy:
        raise CoordinatorError("NotAClient", f"signer is not the healthy client at index {index}")
    return index


def _push_witness(rnd: Round, w: Witness) -> None:
    if any(x.index == w.index for x in rnd.witnesses):
        raise CoordinatorError("DuplicateWitness", f"client {w.index} already witnessed")
    if len(rnd.witnesses) >= MAX_WITNESSES:
        raise CoordinatorError("WitnessesFull", f"{MAX_WITNESSES} witnesses already")
    rnd.witnesses.append(w)


def warmup_witness(s: CoordinatorState, now: int, signer: bytes, index: int) -> None:
    """A client says it has the model loaded; once all (up to 32) have, training starts."""
    _require_running(s)
    if s.run_state == RunState.RoundTrain and s.current_round.height == 0:
        _sender(s, signer, index)
        return  # a late warmup witness: training already started, nothing to do
    if s.run_state != RunState.Warmup:
        raise CoordinatorError("InvalidRunState", f"warmup witness during {s.run_state.name}")
    index = _sender(s, signer, index)
    _require_phase(s, index, (ClientPhase.Active, ClientPhase.WarmingUp), "warmup witness")
    _push_witness(s.current_round, Witness(index))
    if _warmup_ready(s):
        _start_round_train(s, now)  # below min_clients the next tick ends the warmup instead


def _hash_arg(value, name: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != PARAM_HASH_LEN:
        raise CoordinatorError("InvalidOperation", f"{name} must be {PARAM_HASH_LEN} bytes")
    return bytes(value)


def witness(s: CoordinatorState, now: int, signer: bytes, index: int, step: int,
            participant_bloom: bytes, broadcast_bloom: bytes, broadcast_merkle: bytes,
            param_hash: bytes) -> None:
    """An elected witness reports what it received (blooms of trainers and of commitments) and
    the hash of the parameters it trains this step with; a quorum on one hash makes it the
    run's agreed model."""
    _require_round(s, "witness")
    if step != s.step:
        raise CoordinatorError("InvalidRunState", f"witness for step {step!r}, current is {s.step}")
    index = _sender(s, signer, index)
    # a slot reused by a rejoining client keeps its bit in this round's participants: only a
    # client that trains (Active or WarmingUp) may witness
    _require_phase(s, index, (ClientPhase.Active, ClientPhase.WarmingUp), "witness")
    cur = s.current_round
    committee = RoundCommittee(cur, s.config.witness_nodes, 0)
    if not committee.is_witness(index):
        raise CoordinatorError("NotAWitness", f"client {index} is not a witness of step {s.step}")
    participant_bloom = check_bloom_bytes(participant_bloom)
    broadcast_bloom = check_bloom_bytes(broadcast_bloom)
    if (not isinstance(broadcast_merkle, (bytes, bytearray))
            or len(broadcast_merkle) != MERKLE_ROOT_LEN):
        raise CoordinatorError("InvalidOperation",
                               f"broadcast_merkle must be {MERKLE_ROOT_LEN} bytes")
    param_hash = _hash_arg(param_hash, "param_hash")
    _push_witness(cur, Witness(index, participant_bloom, broadcast_bloom, bytes(broadcast_merkle),
                               param_hash))
    _agree_on_params(s, committee.elected_witnesses, param_hash)
    _lagging_witnesses_sync(s)
    if s.run_state == RunState.RoundTrain and len(cur.witnesses) >= committee.elected_witnesses:
        # opportunistic witnessing: every elected witness has all results, no need to wait
        _change_state(s, now, RunState.RoundWitness)


def _lagging_witnesses_sync(s: CoordinatorState) -> None:
    """Once this step's parameters are agreed, a witness that committed others lags: it goes
    back to syncing (the client notices too and replays; see `resync`)."""
    if s.param_step != s.step:
        return
    for w in s.current_round.witnesses:
        c = s.clients[w.index]
        if c.trains and w.param_hash not in (ZERO_HASH, s.param_hash):
            _set_phase(s, w.index, ClientPhase.Syncing)


def _agree_on_params(s: CoordinatorState, elected: int, h: bytes) -> None:
    """The first time a quorum (and majority) of this round's witnesses commit to one hash, it
    becomes the agreed parameters of this step (and the snapshot point when the step is one)."""
    if h == ZERO_HASH or (s.param_step == s.step and s.param_hash == h):
        return
    if sum(1 for w in s.current_round.witnesses if w.param_hash == h) < param_quorum(elected):
        return
    s.param_hash, s.param_step = h, s.step
    interval = s.config.checkpoint_interval
    if interval and s.step % interval == 0:
        s.due_hash, s.due_step = h, s.step


def _require_phase(s: CoordinatorState, index: int, phases: tuple, what: str) -> None:
    phase = s.clients[index].phase
    if phase not in phases:
        raise CoordinatorError("WrongPhase", f"{what} from client {index}, which is "
                               f"{phase.name}, not {' or '.join(p.name for p in phases)}")


def synced(s: CoordinatorState, now: int, signer: bytes, index: int, step: int,
           param_hash: bytes) -> None:
    """A syncing client replayed the applied results up to the agreed parameters: its hash for
    `step` is the quorum's. It warms up next (trains; its results are not applied yet)."""
    _require_round(s, "synced")
    index = _sender(s, signer, index)
    _require_phase(s, index, (ClientPhase.Syncing,), "synced")
    param_hash = _hash_arg(param_hash, "param_hash")
    if type(step) is not int or not 0 <= step < 1 << 32:
        raise CoordinatorError("InvalidOperation", "step must be an integer in [0, 2^32)")
    if s.param_hash == ZERO_HASH or (step, param_hash) != (s.param_step, s.param_hash):
        why = ("the agreed parameters are of a later step" if step < s.param_step
               else "no parameters are agreed for that step yet" if step > s.param_step
               else "they differ from the agreed parameters")
        raise CoordinatorError(
            "SyncHashMismatch", f"step {step} with params {param_hash.hex()[:16]}: {why} "
            f"(step {s.param_step}: {s.param_hash.hex()[:16]})")
    _set_phase(s, index, ClientPhase.WarmingUp)


def resync(s: CoordinatorState, now: int, signer: bytes, index: int) -> None:
    """A client lags (its parameters are not the quorum's, or it misses results it cannot
    fetch): it goes back to syncing at once, without queueing."""
    _require_running(s)
    if s.run_state not in (RunState.Warmup, RunState.RoundTrain, RunState.RoundWitness):
        raise CoordinatorError("InvalidRunState", f"resync during {s.run_state.name}")
    index = _sender(s, signer, index)
    _require_phase(s, index, (ClientPhase.Active, ClientPhase.WarmingUp), "resync")
    _set_phase(s, index, ClientPhase.Syncing)


def trainer_score(s: CoordinatorState, rnd: Round, signer: bytes) -> int:
    """How many of a round's witnesses received a result from this signer."""
    key = signer.hex()
    return sum(1 for w in rnd.witnesses if bloom_contains(w.participant_bloom, key))


def is_healthy(s: CoordinatorState, index: int) -> bool:
    """Healthy unless the client had a batch two rounds back, answered for that round (see
    below), and the witnesses of the round after (who received that round's results) fall short
    of a quorum in vouching for it."""
    trained, witnessed = s.round_back(2), s.round_back(1)
    if trained is None or not s.round_trains(trained):
        return True
    if index not in assign_batches(s.config, trained):
        return True
    c = s.clients[index]
    # the first round it answers for: an Active client's from the step it became Active, any
    # other phase's from the round after it entered it. Earlier batches of its slot were an
    # earlier holder's (a client that left and joined again) or came before it lagged
    if c.since + (c.phase != ClientPhase.Active) > s.round_step(trained):
        return True
    elected = expected_witnesses(s.config.witness_nodes, len(witnessed.participant_indices()))
    return trainer_score(s, witnessed, s.clients[index].signer) >= witness_quorum(elected)


def health_check(s: CoordinatorState, now: int, signer: bytes, index: int, targets: list) -> None:
    """A client names peers that did not deliver; if the witnesses agree, they are dropped."""
    _require_round(s, "health check")
    _sender(s, signer, index)
    if s.round_back(2) is None:
        raise CoordinatorError("InvalidHealthCheck", "no health checks before the third round")
    if not isinstance(targets, list) or not 0 < len(targets) <= MAX_CLIENTS:
        raise CoordinatorError("InvalidHealthCheck", f"name 1 to {MAX_CLIENTS} clients")
    for t in targets:
        if not isinstance(t, int) or not 0 <= t < len(s.clients):
            raise CoordinatorError("InvalidClientIndex", f"no client at index {t!r}")
        if is_healthy(s, t):
            raise CoordinatorError("InvalidHealthCheck", f"client {t} is healthy")
    dropped = set()
    for t in targets:
        if s.clients[t].state == ClientState.Healthy:
            s.clients[t] = s.clients[t].with_state(ClientState.Dropped)
            dropped.add(s.clients[t].signer)
    s.pending = [c for c in s.pending if c.signer not in dropped]


def evidence(s: CoordinatorState, now: int, signer: bytes, index: int, step: int,
             target: int) -> None:
    """An elected verifier of the round that trains `step` (this one or the one before) says the
    result that client `target` sent for it is bad; `target` must be in the verifier's
    `verification_sample`. The round's `accused` mask gets the target: every client leaves that
    result out of the round's apply (the round is final, and the mask frozen, once the next
    round's witness phase is over, which is exactly when evidence for it stops being taken).
    Once `evidence_quorum` distinct verifiers have accused the target in the epoch, it is
    Evicted: out of the epoch, its slot's unsettled points forfeited, its join for the next
    epoch removed; it cannot join again before the next epoch starts."""
    _require_round(s, "evidence")
    index = _sender(s, signer, index)
    rnd = None
    if type(step) is int and step in (s.step, s.step - 1):
        rnd = s.round_back(s.step - step)
    if rnd is None or not s.round_trains(rnd):
        raise CoordinatorError("InvalidEvidence", f"evidence for step {step!r}: only the steps "
                               f"{s.step - 1} and {s.step} of this epoch's training rounds")
    committee = RoundCommittee(rnd, s.config.witness_nodes, s.config.verification_percent)
    if committee.committee(index) != Committee.Verifier:
        raise CoordinatorError("NotAVerifier", f"client {index} is not a verifier of step {step}")
    if type(target) is not int or not 0 <= target < len(s.clients):
        raise CoordinatorError("InvalidClientIndex", f"no client at index {target!r}")
    # the sample holds only trainers with a batch (as the Rust core, one check); the batches
    # are assigned again only to name the refusal
    if target not in verification_sample(s.config, rnd, index, committee):
        why = (f"trained no batch in step {step}"
               if target not in assign_batches(s.config, rnd, committee)
               else f"is not in the sample of verifier {index} for step {step}")
        raise CoordinatorError("InvalidEvidence", f"client {target} {why}")
    c = s.clients[target]
    if c.state != ClientState.Healthy:
        raise CoordinatorError("InvalidEvidence", f"client {target} is {c.state.name}")
    bit = 1 << index
    if c.accusers & bit and rnd.accused >> target & 1:
        raise CoordinatorError("AlreadyAccused", f"client {index} already accused client {target}")
    rnd.accused |= 1 << target
    c = replace(c, accusers=c.accusers | bit)
    if bin(c.accusers).count("1") >= s.config.evidence_quorum:
        c = replace(c, state=ClientState.Evicted, presence=0, sequences=0)
        s.pending = [p for p in s.pending if p.signer != c.signer]
    s.clients[target] = c


def _check_checkpoint(ck: Checkpoint) -> Checkpoint:
    try:
        ok = len(ck.repo.encode()) <= REPO_LEN and len(ck.revision.encode()) <= REPO_LEN
        ok = ok and "\0" not in ck.repo + ck.revision and CheckpointKind(ck.kind) == ck.kind
        ok = ok and isinstance(ck.hash, bytes) and len(ck.hash) == PARAM_HASH_LEN
        ok = ok and type(ck.step) is int and 0 <= ck.step < 1 << 32
    except (AttributeError, TypeError, ValueError):
        ok = False
    if not ok or (ck.kind != CheckpointKind.Dummy and not ck.repo):
        raise CoordinatorError("InvalidCheckpoint",
                               f"repo and revision are at most {REPO_LEN} bytes; "
                               "Hub, P2P and Stored need a repo")
    if ck.kind == CheckpointKind.Stored and ck.hash == ZERO_HASH:
        raise CoordinatorError("InvalidCheckpoint", "a Stored checkpoint needs its parameter hash")
    return ck


def checkpoint(s: CoordinatorState, now: int, signer: bytes, index: int, repo: str,
               step: int, param_hash: bytes, revision: str = "") -> None:
    """A checkpointer stored a snapshot of the agreed parameters at `repo` (its location in the
    run's store): it is recorded only when (step, param_hash) is the latest agreed pair or the
    snapshot point's. A Cooldown snapshot of the epoch's final parameters ends the Cooldown."""
    _require_running(s)
    index = _sender(s, signer, index)
    committee = RoundCommittee(s.current_round, 0, 0, s.config.checkpointer_percent)
    if s.config.checkpointer_percent and not s.current_round.participants:
        # a new epoch's Warmup has no round yet to elect checkpointers from
        raise CoordinatorError("NotACheckpointer", "no checkpointers are elected during Warmup")
    if not committee.is_checkpointer(index):
        raise CoordinatorError("NotACheckpointer", f"client {index} is not an elected checkpointer")
    if not isinstance(repo, str) or not repo or not isinstance(revision, str):
        raise CoordinatorError("InvalidCheckpoint", "repo must be a non-empty string")
    if type(step) is not int or not 0 <= step < 1 << 32:
        raise CoordinatorError("InvalidOperation", "step must be an integer in [0, 2^32)")
    param_hash = _hash_arg(param_hash, "param_hash")
    recorded = _check_checkpoint(Checkpoint(s.checkpoint.kind, repo, revision, param_hash, step))
    latest = (s.param_step, s.param_hash)
    if param_hash == ZERO_HASH or (step, param_hash) not in (latest, (s.due_step, s.due_hash)):
        raise CoordinatorError(
            "CheckpointHashMismatch",
            f"step {step} with params {param_hash.hex()[:16]} is not what the witnesses agreed on "
            f"(step {s.param_step}: {s.param_hash.hex()[:16]}, snapshot point step "
            f"{s.due_step}: {s.due_hash.hex()[:16]})")
    s.checkpoint = recorded
    if s.run_state == RunState.Cooldown and (step, param_hash) == latest:
        _end_epoch(s, now)  # the Cooldown's job is done


def settle(s: CoordinatorState, now: int, index: int) -> None:
    """Anyone moves the points a slot holds into its identity's ledger entry, which lives
    outside this state (a per-contributor account on chain, the server's ledger): the backend
    reads them first (`points.pending_credit`), credits them (`points.credit`) in the same
    transaction, and the slot starts again from zero. Allowed in every run state."""
    if type(index) is not int or not 0 <= index < len(s.clients):
        raise CoordinatorError("InvalidClientIndex", f"no client at index {index!r}")
    c = s.clients[index]
    if not c.unsettled:
        raise CoordinatorError("NothingToSettle", f"client {index} holds no unsettled points")
    s.clients[index] = replace(c, presence=0, sequences=0)


def pause(s: CoordinatorState, now: int) -> None:
    _require_running(s)
    if s.run_state.active:
        s.pending_pause = True  # finish the round, then cooldown, then pause
    else:
        _withdraw_all(s)
        _change_state(s, now, RunState.Paused)


def resume(s: CoordinatorState, now: int) -> None:
    if s.run_state not in (RunState.Paused, RunState.Uninitialized):
        raise CoordinatorError("CannotResume", f"run is {s.run_state.name}, not Paused")
    _start_waiting_for_members(s, now)


def update(s: CoordinatorState, now: int, config: RunConfig = None,
           checkpoint: Checkpoint = None, spec_hash: bytes = None) -> None:
    """The run authority changes the config, the model source or the run spec's hash while the
    run is halted (clients check the spec only when they start: a running run keeps its own)."""
    if s.run_state == RunState.Finished:
        raise CoordinatorError("RunFinished", "a finished run cannot change")
    if not s.run_state.halted:
        raise CoordinatorError("UpdateNotHalted", "pause the run before updating it")
    if config is not None:
        if not isinstance(config, RunConfig):
            raise CoordinatorError("InvalidOperation", "config must be a RunConfig")
        if s.unsettled_count() and config != s.config:
            # points are credited at the rates they were earned under
            raise CoordinatorError("PointsUnsettled", f"{s.unsettled_count()} slots hold "
                                   "unsettled points: settle them before changing the config")
        config = config.validate()
    if checkpoint is not None:
        checkpoint = _check_checkpoint(checkpoint)
    if spec_hash is not None:
        spec_hash = _hash_arg(spec_hash, "spec_hash")
    # nothing changes unless every argument is valid
    if config is not None:
        s.config = config
    if checkpoint is not None:
        s.checkpoint = checkpoint
    if spec_hash is not None:
        s.spec_hash = spec_hash


OPERATIONS = {
    "tick": tick,
    "join": join,
    "withdraw": withdraw,
    "warmup_witness": warmup_witness,
    "witness": witness,
    "health_check": health_check,
    "evidence": evidence,
    "checkpoint": checkpoint,
    "synced": synced,
    "resync": resync,
    "settle": settle,
    "pause": pause,
    "resume": resume,
    "update": update,
}


def tick_deadline(s: CoordinatorState):
    """The earliest time at which `tick` could change the state, or None if only another
    operation can (halted, or waiting for more joins). Clients and servers tick when it is due."""
    cfg, st = s.config, s.run_state
    durations = {
        RunState.Warmup: cfg.warmup_time,
        RunState.RoundTrain: cfg.max_round_train_time,
        RunState.RoundWitness: cfg.round_witness_time,
        RunState.Cooldown: cfg.cooldown_time,
    }
    if st == RunState.WaitingForMembers:
        if len(s.pending) < cfg.init_min_clients or s.unsettled_count():
            return None  # only joins (or settling the slots' points) can start the epoch
        duration = cfg.waiting_for_members_extra_time
    elif st in durations:
        if st == RunState.Warmup and (s.training_count() < cfg.min_clients or _warmup_ready(s)):
            return s.run_state_start
        duration = durations[st]
    else:
        return None
    return s.run_state_start + max(duration, 1)
