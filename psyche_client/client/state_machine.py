"""The client as a state machine fed by coordinator states.

It never reads a clock or does I/O: the daemon feeds it coordinator states, verified peer
results, finished training and the time, and carries out the actions it returns (actions.py:
Send, Prepare, Apply, Train, Evaluate, Snapshot, Publish, Log).

Its duties per phase: join for the next epoch; in Warmup load the model and send a warmup
witness; in RoundTrain train its batch and publish the result; as an elected witness send the
opportunistic witness once every result it waits for has arrived (or in RoundWitness, with what
it has), committing the hash of the parameters it trains the step with (reported by the daemon
after each prepare and apply); as a witness of the last round, send health checks naming
trainers that did not deliver; as an elected checkpointer that can write to the run's store,
snapshot the parameters at Cooldown and every checkpoint_interval steps and record the
snapshot once the witnesses agreed on the same hash (checkpointing.py); tick when a timeout is
due. A client that joins mid-epoch goes through the sync phases (sync.py): its model follows
the rounds' applied sets from a base, and every client keeps those sets for its peers."""

from psyche_coordinator_core import (
    ClientPhase,
    ClientState,
    RoundCommittee,
    RunState,
    assign_batches,
    bloom_of,
    is_healthy,
    tick_deadline,
)

from .actions import (
    Action,
    Apply,
    Evaluate,
    FetchResults,
    Log,
    Prepare,
    Publish,
    Send,
    Snapshot,
    Train,
    Validate,
)
from .applied import AppliedSet
from .checkpointing import Checkpointing
from .consensus import round_consensus
from .copies import SeenPayloads
from .results import MAX_RESULT_BYTES, TrainingResult, merkle_root
from .sync import Sync
from .verifying import Verifying

# run states in which no round ends: the slots' points are final until the next epoch
SETTLE_STATES = (RunState.Cooldown, RunState.WaitingForMembers, RunState.Paused, RunState.Finished)


class ClientStateMachine:
    def __init__(self, signer: bytes, p2p_identity: bytes, tick_jitter: float = 0.0,
                 can_store: bool = False, saves_locally: bool = False, identity: bytes = None,
                 max_payload: int = MAX_RESULT_BYTES):
        """`can_store`: this client can write snapshots to the run's store (a store in the
        spec, write credentials, a trainer with a model); `saves_locally`: it keeps snapshots
        in a directory of its own (--checkpoint-dir) whether or not it is elected. `identity`:
        the contributor identity this node key acts for (its points go there; None: itself).
        `max_payload`: a peer's result with a larger payload is refused unhashed (the daemon
        sets the run's model's bound once its trainer knows the model)."""
        self.signer, self.p2p_identity = signer, p2p_identity
        self.identity = identity
        self.max_payload = max_payload
        self.checkpointing = Checkpointing(signer, can_store, saves_locally)
        self.tick_jitter = tick_jitter  # spread ticks so clients do not all send at once
        self.state = None
        self.first_seen = None  # (step, whether mid-round) of the first state this process saw
        self.assignments = {}  # step -> {client_index: BatchId} (trainers of that round)
        self.results = {}  # step -> {BatchId: TrainingResult}, first valid one per batch
        self.invalid = {}  # step -> {BatchId: why}: its trainer delivered a result not vouched for
        self.validating = set()  # commitments of results being validated
        self.seen = SeenPayloads()  # the valid results' payloads: copies of them are refused
        self.verifying = Verifying(signer)  # an elected verifier's verdicts and evidence
        self.early = {}  # step -> [TrainingResult] received before we saw that round
        self.join_in_flight = False
        self.prepared = set()  # epochs whose model is ready
        self.preparing = set()
        self.warmup_sent = set()
        self.training = set()  # steps being trained or trained
        # step -> the model line its Train started on: a reset before it is done (a lagging
        # client going back to its base) means it did not train from that step's parameters
        self.training_on = {}
        self.trained_steps = set()
        self.witness_sent = set()
        self.health_sent = set()
        self.applied = set()  # steps whose consensus is final (kept, or fetched from peers)
        self.final_upto = 0  # the latest of those
        self.unreported = set()  # steps whose Apply was asked for and has not reported yet
        self.epoch_first = {}  # epoch -> the step its Prepare's model trains first
        self.sync = Sync(signer)  # the applied sets, the model's line, the sync phases
        self.params = None  # hash of the parameters as last reported (None: unknown)
        self.evaluated = set()  # epochs whose held-out loss and snapshot were taken
        self.last_tick_for = None
        self.settle_sent = set()  # (slot, signer, presence, sequences) whose settle was sent
        self.rejected = {}  # trainer hex -> count of bad results
        self.results_asked = set()  # steps whose results were asked of the peers

    # ---------------------------------------------------------------- helpers
    def my_index(self):
        if self.state is None:
            return None
        i = self.state.client_index(self.signer)
        if i is None or self.state.clients[i].state != ClientState.Healthy:
            return None
        return i

    def _evicted(self) -> bool:
        i = self.state.client_index(self.signer)
        return i is not None and self.state.clients[i].state == ClientState.Evicted

    def my_phase(self):
        """This client's phase in the epoch (None: not a healthy client of it)."""
        me = self.my_index()
        return None if me is None else self.state.clients[me].phase

    def _rounds(self) -> list:
        """This epoch's rounds in the state's ring, oldest first."""
        st = self.state
        rounds = [st.round_back(k) for k in range(len(st.rounds))]
        return [r for r in rounds if r is not None][::-1]

    def _saw_round(self, step: int) -> bool:
        """This process saw the round of `step` from its start, with every result published
        in it (a restarted process may take its slot back in the round it was killed in)."""
        first, mid_round = self.first_seen
        return step > first or (step == first and not mid_round)

    def _remember_round(self, st) -> list[Action]:
        acts = []
        for k in range(len(st.rounds)):
            rnd = st.round_back(k)
            if rnd is None:
                break
            step = st.round_step(rnd)
            if step not in self.assignments and rnd.participants:
                trains = st.round_trains(rnd)
                self.assignments[step] = assign_batches(st.config, rnd) if trains else {}
                for r in self.early.pop(step, []):
                    acts += self._accept(r)
        # forget what no round in the ring can refer to any more
        oldest = st.step - len(st.rounds) - 1
        for d in (self.assignments, self.results, self.invalid, self.early):
            for s in [s for s in d if s < oldest]:
                del d[s]
        self.seen.forget(st.step)
        self.verifying.forget(oldest)
        return acts

    def _accept(self, r: TrainingResult) -> list[Action]:
        assigned = self.assignments.get(r.step)
        if assigned is None:
            self.early.setdefault(r.step, []).append(r)
            return []
        passed = self._passed_over(r, assigned)
        if passed is not None:
            return passed
        self.validating.add(r.commitment)
        return [Validate(r)]

    def _passed_over(self, r: TrainingResult, assigned: dict) -> list[Action] | None:
        """None when a result of a round whose assignments are known is worth validating; else
        what to do instead: refuse it (its signer is not the batch's assigned trainer) or drop
        it (the first result of a batch counts: a later one is not looked at)."""
        owner = next((i for i, b in assigned.items() if b == r.batch), None)
        if owner is None or self.state.clients[owner].signer != r.trainer:
            return self._reject(r, "not the assigned trainer of that batch")
        if self._decided(r.step, r.batch) or r.commitment in self.validating:
            return []
        return None

    def _decided(self, step: int, batch) -> bool:
        """A result of this batch was taken, or its trainer's was found bad: the first counts."""
        return batch in self.results.get(step, {}) or batch in self.invalid.get(step, {})

    def validated(self, r: TrainingResult, why: str, fingerprint=None) -> list[Action]:
        """The validation of a peer's result is done: `why` is '' when its payload fits the run's
        model. A valid result that copies another one (this round's, or a payload of the rounds
        before) is refused as well. A refused result is never vouched for: its trainer's score
        falls short of the witness quorum and the health checks remove it."""
        self.validating.discard(r.commitment)
        if r.step not in self.assignments or self._decided(r.step, r.batch):
            return []
        if not why:
            copied = self.seen.copy_of(r.step, r.payload, fingerprint)
            why = f"a copy: {copied}" if copied else ""
        if why:
            self.invalid.setdefault(r.step, {})[r.batch] = why
            return self._reject(r, why) + self._witness()
        self.seen.add(r.step, r.payload, fingerprint, r.trainer)
        self.results.setdefault(r.step, {})[r.batch] = r
        return self._witness() + self._judge()

    def _judge(self) -> list[Action]:
        """An elected verifier's Verify of each result of its sample, once it is here and valid
        and while the model holds the parameters that train its step (a result judged against
        other parameters is judged wrongly: one round's apply moves it far)."""
        st = self.state
        if st is None or not self.sync.trains(st.step):
            return []
        return self.verifying.due(st, self.my_index(), self.my_phase(), self.assignments,
                                  self.results, self.invalid)

    def verified(self, step: int, result: TrainingResult, bad: bool, detail: str
                 ) -> list[Action]:
        """The loss-improvement test of a result this client verified is done."""
        return self.verifying.verdict(self.state, self.my_index(), step, result, bad, detail)

    def _reject(self, r, why) -> list[Action]:
        key = r.trainer.hex()
        self.rejected[key] = self.rejected.get(key, 0) + 1
        return [Log(f"dropped result for step {r.step} {r.batch} from {key[:8]}: {why}")]

    def _have_all(self, step: int) -> bool:
        """A result (valid or refused) for every batch of `step` whose trainer is still
        healthy."""
        assigned = self.assignments.get(step)
        if assigned is None:
            return False
        for idx, batch in assigned.items():
            if self._decided(step, batch):
                continue
            if self.state.clients[idx].state != ClientState.Healthy:
                continue  # it left: nobody will deliver this batch, do not wait for it
            return False
        return True

    # ---------------------------------------------------------------- inputs
    def on_state(self, st, now: float) -> list[Action]:
        if self.state is None:
            self.first_seen = (st.step, st.run_state in (RunState.RoundTrain,
                                                         RunState.RoundWitness))
        self.state = st
        acts = self._remember_round(st)
        acts += self._join()
        me = self.my_index()
        phase = self.my_phase()
        acts += self.sync.on_state(st, me, now)
        if phase == ClientPhase.Active and st.run_state == RunState.Warmup:
            if st.epoch not in self.prepared and st.epoch not in self.preparing:
                self.preparing.add(st.epoch)
                self.epoch_first[st.epoch] = st.step
                self.sync.line = None  # the epoch's model replaces the last one
                acts.append(Prepare(st.epoch))
            acts += self._warmup_witness()
        if me is not None and st.run_state.active:
            acts += self._finalize()
            acts += self._advance()  # before training: the next step must see these results
        if me is not None and st.run_state == RunState.RoundTrain:
            # after the applies above, before training: the parameters this step trains with
            if phase == ClientPhase.Active:
                acts += self.checkpointing.at_round(st, me)
            if phase.trains:  # a rejoined client's slot may keep the round's bit: not its batch
                acts += self._train(me)
                acts += self._health_checks(me)
        acts += self._judge()  # after the applies above: it judges with this step's parameters
        if (phase is not None and phase.trains and st.run_state == RunState.Cooldown
                and st.epoch not in self.evaluated):
            self.evaluated.add(st.epoch)
            # _advance above has queued the epoch's last apply (Cooldown ends every round), and
            # no round of this epoch is applied after it: these are the next epoch's parameters
            acts += [Evaluate(st.epoch, st.step - 1), Snapshot(st.step)]
            if phase == ClientPhase.Active:
                acts += self.checkpointing.at_cooldown(st, me)
        acts += self.checkpointing.record(st, me)
        acts += self._witness()
        acts += self._tick(now)
        acts += self._settle(now)
        return acts

    def model_ready(self, epoch: int, params: bytes = None) -> list[Action]:
        """The model for `epoch` is loaded; `params` is its parameter hash."""
        self.preparing.discard(epoch)
        self.prepared.add(epoch)
        self.params = params
        if self.state is not None and epoch == self.state.epoch:
            self.sync.epoch_model(self.epoch_first.get(epoch, self.state.step), params)
            return self._warmup_witness() + self._advance()
        return self._warmup_witness()

    def applied_params(self, step: int, params: bytes = None) -> list[Action]:
        """The Apply of `step` is done (params: the hash after it; None: it failed)."""
        self.unreported.discard(step)
        self.params = params
        self.sync.applied(step, params)
        return self.sync.check() + self._witness()

    def base_ready(self, step: int, params: bytes) -> list[Action]:
        """The base model (LoadBase, ResetToBase) is in place: it trains `step`."""
        return self.sync.base_ready(step, params) + self._advance()

    def base_failed(self, why: str) -> list[Action]:
        return self.sync.base_failed(why)

    def kept_set(self, step: int):
        """The applied set of `step` this client serves to its peers, or None."""
        return self.sync.kept(step)

    def received_results(self, step: int) -> list:
        """The verified results of `step` this client holds, for a peer that missed some."""
        return list(self.results.get(step, {}).values())

    def fetched(self, step: int, s: AppliedSet = None, peer: str = None) -> list[Action]:
        """A peer's applied set for `step` (FetchApplied); None: no peer held it."""
        verified = self._verify(s) if s is not None else None
        acts = self.sync.fetched(step, s, peer, verified) + self._advance()
        me = self.my_index()
        if (me is not None and self.state.run_state == RunState.RoundTrain
                and self.my_phase().trains):
            acts += self._train(me)
        return acts + self.sync.check() + self._witness()

    def snapshot_stored(self, step: int, params: bytes, location: str) -> list[Action]:
        """The snapshot labelled `step` (parameter hash `params`) is in the store at
        `location`: record it once the witnesses agree on that pair."""
        self.checkpointing.stored(step, params, location)
        return self.checkpointing.record(self.state, self.my_index())

    def trained(self, step: int, result: TrainingResult) -> list[Action]:
        if self.training_on.pop(step, self.sync.line) is not self.sync.line:
            # its parameters were taken away while it trained: a result of other parameters,
            # which verifiers would judge bad; the coordinator excuses the lagging client's batch
            return [Log(f"[SYNC] dropped this client's result for step {step}: the model went "
                        "back to its base while it trained")]
        self.trained_steps.add(step)
        if not self._decided(step, result.batch):
            self.results.setdefault(step, {})[result.batch] = result
            self.seen.add(step, result.payload, None, result.trainer)
        return [Publish(result)] + self._witness()

    def on_result(self, r: TrainingResult) -> list[Action]:
        # what needs no hashing first: a peer must not make this client hash a payload that it
        # refuses anyway. An over-size result is not held against its batch (nothing shows that
        # its trainer signed that payload): the trainer's batch stays undelivered, as if no
        # result had come, and the health checks drop a trainer that never delivers one.
        why = r.oversize(self.max_payload)
        if why:
            return self._reject(r, why)
        assigned = self.assignments.get(r.step)
        if assigned is not None:
            passed = self._passed_over(r, assigned)
            if passed is not None:
                return passed
        why = r.check(self.max_payload)
        if why:
            return self._reject(r, why)
        return self._accept(r) + self._witness()

    def op_finished(self, op: str, code: str = None, args: dict = None) -> list[Action]:
        """The coordinator answered `op` (code None: accepted), or it could not be delivered
        (code "Unreachable"). The next state or timer re-checks the duty, so an answer racing a
        new state loses nothing and an undelivered witness is sent again."""
        if op == "join":
            self.join_in_flight = False
        elif op in ("synced", "resync"):
            return self.sync.answered(op, code, args)
        elif code == "Unreachable" and op == "witness":
            self.witness_sent.discard(args["step"])
        elif code == "Unreachable" and op == "warmup_witness" and self.state is not None:
            self.warmup_sent.discard(self.state.epoch)
        elif op == "checkpoint":
            return self.checkpointing.answered(code, args)
        elif op == "evidence" and code is None:
            return [Log(f"sent evidence against client {args['target']} for step "
                        f"{args['step']}")]
        elif op == "settle" and code == "Unreachable":
            self.settle_sent = {k for k in self.settle_sent if k[0] != args["index"]}
        return []

    def on_timer(self, now: float) -> list[Action]:
        return (self._join() + self._warmup_witness() + self._witness() + self._tick(now)
                + self._settle(now) + self.sync.on_timer(now))

    # ---------------------------------------------------------------- duties
    def _join(self) -> list[Action]:
        """Join for the next epoch whenever this client is not yet registered for it. An
        evicted client (its verifiers' evidence) waits: the coordinator refuses its joins
        (Evicted) until the next epoch has rebuilt the client list."""
        st = self.state
        if (st is None or st.run_state == RunState.Finished or self.join_in_flight
                or st.pending_index(self.signer) is not None or self._evicted()):
            return []
        self.join_in_flight = True
        args = {"signer": self.signer, "p2p_identity": self.p2p_identity}
        if self.identity is not None and self.identity != self.signer:
            args["identity"] = self.identity
        return [Send("join", args)]

    def _tick(self, now: float) -> list[Action]:
        st = self.state
        if st is None:
            return []
        due = tick_deadline(st)
        key = (st.run_state, st.run_state_start, st.step, len(st.pending))
        if due is not None and now >= due + self.tick_jitter and self.last_tick_for != key:
            self.last_tick_for = key
            return [Send("tick", {})]
        return []

    def _settle(self, now: float) -> list[Action]:
        """Once the epoch's rounds are over (Cooldown and after), settle the points the slots
        hold: this client's own at once, the others' (clients that left or died) after the tick
        jitter, as ticks are spread. The next epoch starts only once every slot is settled."""
        st = self.state
        if st is None:
            return []
        # a settle is sent once for what a slot holds: forgotten once the state shows the slot
        # settled (or holding other counts), so the same counts in a later epoch are settled
        # again. Not keyed by epoch: the last epoch's Cooldown and the Finished after it have
        # different epoch numbers, and the slot the same points (sent twice: NothingToSettle)
        live = {(i, c.signer, c.presence, c.sequences) for i, c in enumerate(st.clients)
                if c.unsettled}
        self.settle_sent &= live
        if st.run_state not in SETTLE_STATES:
            return []
        out = []
        for i, c in enumerate(st.clients):
            key = (i, c.signer, c.presence, c.sequences)
            if not c.unsettled or key in self.settle_sent:
                continue
            if c.signer != self.signer and now < st.run_state_start + 1 + self.tick_jitter:
                continue
            self.settle_sent.add(key)
            out.append(Send("settle", {"index": i}))
        return out

    def _warmup_witness(self) -> list[Action]:
        st, me = self.state, self.my_index()
        if (me is None or st.run_state != RunState.Warmup or st.epoch not in self.prepared
                or st.epoch in self.warmup_sent or self.my_phase() != ClientPhase.Active):
            return []
        self.warmup_sent.add(st.epoch)
        return [Send("warmup_witness", {"signer": self.signer, "index": me})]

    def _finalize(self) -> list[Action]:
        """Take the consensus of every round of this epoch that is final, in step order: round
        r is final once the witness phase of round r+1 is over. A complete set is kept (and
        applied by _advance); a set missing payloads the witnesses vouched for is never applied
        in part: it is fetched from peers instead."""
        st, acts = self.state, []
        rounds = self._rounds()
        for r, nxt in zip(rounds, rounds[1:]):
            step = st.round_step(r)
            if step in self.applied:
                continue
            if nxt is st.current_round and st.run_state in (RunState.RoundTrain,
                                                            RunState.RoundWitness):
                break  # round r+1 is still collecting witnesses
            self.applied.add(step)
            self.final_upto = max(self.final_upto, step)
            assigned = self.assignments.get(step, {})
            chosen, missing = round_consensus(st, nxt, assigned, self.results.get(step, {}),
                                              r.warming, r.accused)
            if missing:
                me = self.my_index()
                # a round this process trained and saw from its start: not a joiner's first
                # rounds, nor those its slot's previous process trained before it was killed
                if (me is not None and r.participants >> me & 1 and step in self.training
                        and self._saw_round(step)):
                    acts.append(Log(f"DESYNC: step {step}: no payload for batches "
                                    f"{', '.join(map(str, missing))} that the witnesses "
                                    "accepted: fetching the step's applied set from peers"))
                continue
            self.sync.keep(AppliedSet(step, bool(assigned) or bool(chosen), tuple(chosen)))
        if st.run_state == RunState.Cooldown and rounds:
            # the epoch's last round is applied by nobody (it drains, or the epoch ended early)
            last = st.round_step(rounds[-1])
            if last not in self.applied:
                self.applied.add(last)
                self.final_upto = max(self.final_upto, last)
                self.sync.keep(AppliedSet(last, False, ()))
        return acts

    def _advance(self) -> list[Action]:
        st = self.state
        upto = max(self.final_upto, st.param_step - 2 if st is not None else 0)
        acts = self.sync.advance(upto)
        for a in acts:
            if isinstance(a, Apply):  # the witness waits for its report
                self.unreported.add(a.step)
        return acts

    def _verify(self, s: AppliedSet):
        """A peer's set checked against the witnesses of its round when the state still holds
        that round: the set as this client's consensus makes it with the peer's results, or
        False when payloads the witnesses vouched for are still missing; None when the round
        is gone from the state (the replay's final hash checks it)."""
        st = self.state
        rounds = self._rounds()
        for r, nxt in zip(rounds, rounds[1:]):
            if st.round_step(r) != s.step:
                continue
            assigned = self.assignments.get(s.step, {})
            merged = dict(self.results.get(s.step, {}))
            for res in s.results:
                owner = next((i for i, b in assigned.items() if b == res.batch), None)
                if owner is not None and st.clients[owner].signer == res.trainer:
                    merged[res.batch] = res
            chosen, missing = round_consensus(st, nxt, assigned, merged, r.warming, r.accused)
            if missing:
                return False
            return AppliedSet(s.step, bool(assigned) or bool(chosen), tuple(chosen))
        return None

    def _train(self, me: int) -> list[Action]:
        st = self.state
        step = st.step
        batch = self.assignments.get(step, {}).get(me)
        if batch is None or step in self.training or self.sync.behind(step):
            return []  # behind: a set its parameters need is still being fetched
        if not self._saw_round(step):
            return []  # the slot's bit from its killed process: this one took the slot back
        self.training.add(step)
        self.training_on[step] = self.sync.line
        return [Train(step, batch)]

    def _health_checks(self, me: int) -> list[Action]:
        st = self.state
        step, witnessed = st.step, st.round_back(1)
        if step in self.health_sent or st.round_back(2) is None:
            return []
        self.health_sent.add(step)
        if not RoundCommittee(witnessed, st.config.witness_nodes, 0).is_witness(me):
            return []
        targets = [i for i, c in enumerate(st.clients)
                   if c.state == ClientState.Healthy and not is_healthy(st, i)]
        if not targets:
            return []
        names = ", ".join(st.clients[i].signer.hex()[:8] for i in targets)
        return [Log(f"health check: {names} delivered no result for step {step - 2}"),
                Send("health_check", {"signer": self.signer, "index": me, "targets": targets})]

    def _witness(self) -> list[Action]:
        st = self.state
        if st is None or st.run_state not in (RunState.RoundTrain, RunState.RoundWitness):
            return []
        me, step = self.my_index(), st.step
        if me is None or step in self.witness_sent or not st.clients[me].phase.trains:
            return []
        if not self._saw_round(step):
            return []  # it took its slot back mid-round: it saw part of the round's results
        if not RoundCommittee(st.current_round, st.config.witness_nodes, 0).is_witness(me):
            return []
        if any(k <= step - 2 for k in self.unreported):
            return []  # the witness commits the parameters this step trains with: wait for them
        behind = self.sync.behind(step)  # a set those parameters need is being fetched
        if behind and st.run_state == RunState.RoundTrain:
            return []
        if st.run_state == RunState.RoundTrain:
            mine = self.assignments.get(step, {}).get(me)
            if mine is not None and step not in self.trained_steps:
                return []
            prev = st.round_back(1)
            if prev is not None and not self._have_all(step - 1):
                if not prev.participants >> me & 1 and step - 1 not in self.results_asked:
                    # its first round: it joined while the one before ran, and saw only part
                    # of it; as a witness it vouches for that round's results: ask the peers
                    self.results_asked.add(step - 1)
                    return [FetchResults(step - 1)]
                return []
            if not self._have_all(step):
                return []  # every trainer of this round must be done before the round ends
        self.witness_sent.add(step)
        got = sorted(self.results.get(step - 1, {}).values(), key=lambda r: r.batch)
        if st.round_back(1) is None:
            got = []  # the first round of an epoch attests nothing
        return [Send("witness", {
            "signer": self.signer, "index": me, "step": step,
            "participant_bloom": bloom_of(r.trainer.hex() for r in got),
            "broadcast_bloom": bloom_of(r.commitment.hex() for r in got),
            "broadcast_merkle": merkle_root([r.commitment for r in got]),
            "param_hash": self._params_for(step, behind) or bytes(32)})]

    def _params_for(self, step: int, behind: bool):
        """The hash this client trains `step` with (None: it has none to commit)."""
        if self.sync.line is None:
            return self.params
        return None if behind else self.sync.hash_training(step)
