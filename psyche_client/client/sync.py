"""Joining a live run, and getting back in step: the client's duties per phase (seed 002).

The phase is the coordinator's (`clients[me].phase`); this part of the state machine (no I/O,
no clock) keeps the model in step with the run's applied result sets:

- every finalized round's applied set is kept (also empty ones) for `kept_rounds` steps and
  served to peers; a set the client cannot make itself (a payload the witnesses vouched for
  never reached it: a DESYNC) is fetched from peers, never applied in part;
- Queued: the base is loaded once (LoadBase: the recorded snapshot, else the run seed's model)
  and kept; `[SYNC] queued: position P of Q` once a minute and at every change;
- Syncing: the model replays the applied sets from its base (fetched from peers when not held)
  until the hash of the parameters that train the agreed step equals the agreed hash, then
  `synced`; a peer whose sets give another hash is skipped; a step no peer holds means waiting
  for the next snapshot;
- WarmingUp and Active: the model applies every round; when the agreed hash for a step differs
  from its own, or a missing set cannot be had from any peer, the client sends `resync`, and
  once Syncing it replays from its base again.

The `[SYNC]` lines are the operator's view of these phases."""

from psyche_coordinator_core import CheckpointKind, ClientPhase, ClientState, RunState

from .actions import Action, Apply, FetchApplied, LoadBase, Log, ResetToBase, Send
from .applied import AppliedSet, ModelLine

ZERO = bytes(32)
QUEUE_LOG_INTERVAL = 60.0  # seconds between repeats of an unchanged queue position
MAX_FETCHES = 8  # applied sets asked for at once


class Sync:
    def __init__(self, signer: bytes):
        self.signer = signer
        self.state, self.me = None, None
        self.sets = {}  # step -> AppliedSet: applied (or to apply); kept and served
        self.unverified = {}  # step -> peer: sets fetched for rounds no longer in the state
        self.excluded = set()  # peers whose sets replayed to another hash
        self.fetching = set()
        self.given_up = set()  # steps no peer held (until a new base)
        self.line = None  # ModelLine of the model, None while it has none to follow
        self.base = None  # (step, hash) of the kept base
        self.base_loading = False
        self.base_missing_logged = None
        self.wait_snapshot = None  # checkpoint step to move past before loading a new base
        self.seen = None  # (phase, since) last seen
        self.phase_logged = set()  # (phase, since) whose [SYNC] lines were written
        self.queue_logged = (None, float("-inf"))  # ((position, of), time)
        self.synced_sent = set()  # agreed steps a synced was sent for
        self.resync_sent = None  # the `since` of the phase a resync was sent from
        self.mismatch_logged = set()

    # ------------------------------------------------------------ reading the state
    def phase(self):
        st, me = self.state, self.me
        if st is None or me is None:
            return None
        return st.clients[me].phase

    def applies(self) -> bool:
        """Whether the model follows the rounds now (Queued clients wait with their base)."""
        return self.phase() in (ClientPhase.Syncing, ClientPhase.WarmingUp, ClientPhase.Active)

    def kept(self, step: int):
        """The applied set of `step` for a peer, if held and checked."""
        if step in self.unverified:
            return None
        return self.sets.get(step)

    def hash_training(self, step: int):
        return None if self.line is None else self.line.hash_training(step)

    def trains(self, step: int) -> bool:
        """The model holds the parameters that train `step` (ModelLine.trains; applies
        queued count as done)."""
        return self.line is not None and self.line.trains(step)

    def behind(self, step: int) -> bool:
        """The model still lacks a set that the parameters training `step` need."""
        return self.line is not None and self.line.cursor <= step - 2

    # ------------------------------------------------------------ keeping sets
    def keep(self, s: AppliedSet) -> None:
        self.sets[s.step] = s
        self.unverified.pop(s.step, None)
        st = self.state
        keep = st.config.kept_rounds if st is not None else 64
        oldest = s.step - keep
        if self.line is not None:
            oldest = min(oldest, self.line.cursor)  # still to replay
        for k in [k for k in self.sets if k < oldest]:
            del self.sets[k]
            self.unverified.pop(k, None)

    # ------------------------------------------------------------ the model's line
    def epoch_model(self, step: int, digest) -> None:
        """The epoch's model is loaded (Prepare): it trains `step`, the epoch's first."""
        self.line = ModelLine(step, digest, "epoch")

    def applied(self, step: int, digest) -> None:
        if self.line is not None:
            self.line.reported(step, digest)

    def advance(self, final_upto: int) -> list[Action]:
        """Apply, in step order, every set the model lacks; ask peers for gaps up to
        `final_upto` (the last step whose set is final)."""
        if self.line is None or not self.applies():
            return []
        acts = []
        while (s := self.sets.get(self.line.cursor)) is not None:
            if self.line.advance(s):
                acts.append(Apply(s.step, list(s.results)))
        step = self.line.cursor
        while step <= final_upto and len(self.fetching) < MAX_FETCHES:
            if step not in self.sets and step not in self.fetching and step not in self.given_up:
                self.fetching.add(step)
                acts.append(FetchApplied(step, frozenset(self.excluded)))
            step += 1
        return acts

    def fetched(self, step: int, s, peer, verified) -> list[Action]:
        """A peer's set for `step` arrived (None: no peer had it). `verified`: the set as
        checked against the round's witnesses, None when the round is gone from the state,
        False when it fails the check."""
        self.fetching.discard(step)
        if step in self.sets:
            return []
        if s is None or verified is False:
            if verified is False:
                self.excluded.add(peer)
                return [Log(f"[SYNC] the applied set of step {step} from {peer[:8]} does not "
                            "match the witnesses: skipping that peer")]
            return self._unobtainable(step)
        self.keep(verified or s)
        if verified is None:
            self.unverified[step] = peer
        return []

    def _unobtainable(self, step: int) -> list[Action]:
        self.given_up.add(step)
        phase = self.phase()
        if phase == ClientPhase.Syncing:
            # a snapshot newer than the base (recorded already, or the next one) covers it
            self.wait_snapshot = self.base[0] if self.base else self.state.checkpoint.step
            return [Log(f"[SYNC] no peer holds step {step}: waiting for the next snapshot")]
        if phase in (ClientPhase.Active, ClientPhase.WarmingUp):
            return self._resync(f"no peer holds the applied set of step {step}")
        return []

    # ------------------------------------------------------------ the base
    def base_ready(self, step: int, digest: bytes) -> list[Action]:
        self.base_loading = False
        self.base = (step, digest)
        if self.phase() not in (ClientPhase.Queued, ClientPhase.Syncing):
            return []  # an epoch began meanwhile: its model (Prepare) is the one to follow
        self.line = ModelLine(step, digest, "snapshot")
        self.given_up.clear()
        self.wait_snapshot = None
        acts = [Log(f"[SYNC] base model ready: the snapshot of step {step}, params "
                    f"{digest.hex()[:16]}")]
        return acts + self._phase_lines()

    def base_failed(self, why: str) -> list[Action]:
        self.base_loading = False
        self.wait_snapshot = self.state.checkpoint.step if self.state is not None else 0
        return [Log(f"[SYNC] cannot load the base model: {why}; waiting for the next snapshot")]

    def _load_base(self) -> list[Action]:
        st = self.state
        ck = st.checkpoint
        if self.base is not None or self.base_loading:
            return []
        if self.wait_snapshot is not None and ck.step <= self.wait_snapshot:
            return []
        if ck.hash == ZERO and ck.kind != CheckpointKind.Dummy:
            if self.base_missing_logged != st.epoch:
                self.base_missing_logged = st.epoch
                return [Log("[SYNC] no snapshot is recorded yet: waiting for one")]
            return []
        self.base_loading = True
        return [LoadBase()]

    def _back_to_base(self) -> list[Action]:
        """Replay from the base again (a lagging client): the kept one, else a download."""
        self.line = None
        for k in list(self.unverified):
            del self.sets[k]
        self.unverified.clear()
        if self.base is not None and not self.base_loading:
            self.base_loading = True
            return [ResetToBase()]
        return self._load_base()

    # ------------------------------------------------------------ per state
    def on_state(self, st, me, now: float) -> list[Action]:
        self.state, self.me = st, me
        phase = self.phase()
        if phase is None:
            return []
        since = st.clients[me].since
        acts = []
        if self.seen != (phase, since):
            before = self.seen[0] if self.seen is not None else None
            self.seen = (phase, since)
            acts += self._entered(phase, before)
        if phase == ClientPhase.Queued:
            acts += self._load_base() + self._queue_position(now)
        elif phase == ClientPhase.Syncing:
            if (self.wait_snapshot is not None and st.checkpoint.step > self.wait_snapshot
                    and not self.base_loading):
                # a newer snapshot: replay from it instead of the old base
                self.base, self.line = None, None
            if self.line is None and not self.base_loading:
                acts += self._back_to_base()  # the kept base, else a download
            acts += self._synced()
        elif phase in (ClientPhase.WarmingUp, ClientPhase.Active):
            acts += self._lagging()
        return acts

    def on_timer(self, now: float) -> list[Action]:
        if self.phase() == ClientPhase.Queued:
            return self._queue_position(now)
        return []

    def check(self) -> list[Action]:
        """After an Apply reported: is the model now at the agreed parameters (Syncing), or
        off them (WarmingUp, Active)?"""
        phase = self.phase()
        if phase == ClientPhase.Syncing:
            return self._synced()
        if phase in (ClientPhase.WarmingUp, ClientPhase.Active):
            return self._lagging()
        return []

    def answered(self, op: str, code, args: dict) -> list[Action]:
        if op == "synced" and code == "Unreachable":
            self.synced_sent.discard(args["step"])  # sent again while that step is agreed
        elif op == "resync" and code == "Unreachable":
            self.resync_sent = None
        elif op == "synced" and code is None:
            return [Log(f"[SYNC] synced at step {args['step']}: params "
                        f"{args['param_hash'].hex()[:16]} are the quorum's")]
        return []

    def _entered(self, phase, before) -> list[Action]:
        if phase == ClientPhase.Syncing and (before in (ClientPhase.Active, ClientPhase.WarmingUp)
                                             or (self.line and self.line.origin == "epoch")):
            return [Log("[SYNC] lagging behind the run: replaying from the base")] \
                + self._back_to_base() + self._phase_lines()
        if phase == ClientPhase.Active and before == ClientPhase.WarmingUp:
            return [Log("[SYNC] Sync complete. Node is now fully contributing to training.")]
        if phase == ClientPhase.Active:
            self.resync_sent = None
        return self._phase_lines()

    def _phase_lines(self) -> list[Action]:
        st, phase = self.state, self.phase()
        if phase is None:
            return []
        since = st.clients[self.me].since
        key = (phase, since)
        if key in self.phase_logged:
            return []
        if phase == ClientPhase.Syncing:
            if self.line is None:
                return []  # written once the base is there: the lines say how far it is
            self.phase_logged.add(key)
            end = max(st.param_step, st.step - 1)
            return [Log("[SYNC] Synchronising weights with peers. Node won't process batches "
                        "in this phase."),
                    Log(f"[SYNC] This phase will last {max(end - self.line.base_step, 0)} steps "
                        f"(until step {end}).")]
        if phase == ClientPhase.WarmingUp:
            self.phase_logged.add(key)
            k = st.config.sync_warmup_rounds
            return [Log("[SYNC] Synchronising optimizer state. Node is now processing batches, "
                        "but doesn't contribute to weight averaging yet."),
                    Log(f"[SYNC] This phase will last {k} steps (until step {since + k + 1}).")]
        return []

    def _queue_position(self, now: float) -> list[Action]:
        st = self.state
        queued = sorted((c.since, i) for i, c in enumerate(st.clients)
                        if c.state == ClientState.Healthy and c.phase == ClientPhase.Queued)
        mine = (st.clients[self.me].since, self.me)
        if mine not in queued:
            return []
        where = (queued.index(mine) + 1, len(queued))
        last, at = self.queue_logged
        if where == last and now - at < QUEUE_LOG_INTERVAL:
            return []
        self.queue_logged = (where, now)
        return [Log(f"[SYNC] queued: position {where[0]} of {where[1]}")]

    def _synced(self) -> list[Action]:
        st = self.state
        if (self.line is None or st.param_hash == ZERO or st.param_step in self.synced_sent
                or st.run_state not in (RunState.RoundTrain, RunState.RoundWitness)):
            return []
        step = st.param_step
        mine = self.line.hash_training(step)
        if mine is None:
            return []
        if mine == st.param_hash:
            self.synced_sent.add(step)
            return [Send("synced", {"signer": self.signer, "index": self.me, "step": step,
                                    "param_hash": mine})]
        if step in self.mismatch_logged:
            return []
        self.mismatch_logged.add(step)
        suspects = {p for s, p in self.unverified.items() if s <= step - 2}
        acts = [Log(f"[SYNC] replayed params for step {step} are {mine.hex()[:16]}, the "
                    f"quorum agreed on {st.param_hash.hex()[:16]}")]
        if suspects:
            self.excluded |= suspects
            acts.append(Log(f"[SYNC] skipping the sets of {', '.join(p[:8] for p in suspects)} "
                            "and replaying from the base"))
            acts += self._back_to_base()
        return acts

    def _lagging(self) -> list[Action]:
        st = self.state
        if self.line is None or st.param_hash == ZERO:
            return []
        mine = self.line.hash_training(st.param_step)
        if mine is None or mine == st.param_hash:
            return []
        return self._resync(f"params for step {st.param_step} are {mine.hex()[:16]}, the quorum "
                            f"agreed on {st.param_hash.hex()[:16]}")

    def _resync(self, why: str) -> list[Action]:
        st = self.state
        since = st.clients[self.me].since
        if self.resync_sent == since:
            return []
        self.resync_sent = since
        return [Log(f"[SYNC] lagging: {why}: back to syncing"),
                Send("resync", {"signer": self.signer, "index": self.me})]
