"""The client state machine against the real core, in process, with a simulated clock: no
sockets, so every duty (join, warmup, train, publish, witness, health check, tick) is checked
deterministically. The integration tests run the same machine over real processes."""

import hashlib
from dataclasses import replace

from psyche_client.client.actions import (
    Apply,
    FetchApplied,
    FetchResults,
    LoadBase,
    Log,
    Prepare,
    Publish,
    ResetToBase,
    Send,
    Snapshot,
    StoreSnapshot,
    Train,
    Validate,
    Verify,
)
from psyche_client.client.results import TrainingResult, dummy_payload
from psyche_client.client.state_machine import ClientStateMachine
from psyche_client.identity import Identity
from psyche_coordinator_core import (
    ClientState,
    CoordinatorError,
    RunConfig,
    RunState,
    apply,
    new_run,
)

CONFIG = RunConfig(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
                   epoch_time=15, total_steps=30, max_seq_len=16, min_clients=2,
                   init_min_clients=4, witness_nodes=0, global_batch_size_start=8,
                   global_batch_size_end=8, waiting_for_members_extra_time=1)

OVERSIZE = 4096  # bytes of an `oversize` client's payloads (an honest one has 32)


def sim_params(step: int) -> bytes:
    """The parameter hash every simulated client holds when it trains `step`."""
    return hashlib.sha256(b"sim-params/%d" % step).digest()


class Sim:
    """A server that applies operations then ticks, and clients that answer instantly."""

    def __init__(self, n, silent=(), config=CONFIG, can_store=(), forked=(), deaf=(),
                 wrong=(), chained=False, liar=None, garbage=(), harmful=(), oversize=()):
        """`deaf`: (receiver, trainer) pairs whose results never arrive; `wrong`: (client,
        step) pairs whose Apply goes wrong (another parameter hash); `chained`: a parameter
        hash follows the results applied (not only the step); `liar`: a client that serves
        applied sets with a result left out; `garbage`: clients whose results carry 20 bytes
        that are not the batch's result (signed and committed all the same); `harmful`: clients
        whose results pass validation but fail the verifiers' loss-improvement test;
        `oversize`: clients whose results carry OVERSIZE zero bytes (signed and committed)."""
        self.garbage, self.harmful, self.oversize = set(garbage), set(harmful), set(oversize)
        self.chained, self.liar, self.hashes = chained, liar, {}
        self.ids, self.sms = [], []
        self.can_store = set(can_store)
        for _ in range(n):
            self.add_client()
        self.forked = set(forked)  # these snapshot parameters of their own, not the run's
        self.snapshots = []  # (client, StoreSnapshot, parameter hash captured)
        self.logs = []  # (client, text)
        self.silent = set(silent)  # these train but never publish their results
        self.t = 1_000
        self.state = apply(new_run("sim", config, 99), self.t, "resume")
        self.sent = []  # (client, op)
        self.sent_args = []  # (client, op, args)
        self.rejected = []
        self.published = []  # every result a client published
        self.deaf, self.wrong = set(deaf), set(wrong)
        self.fetches = []  # (client, step, peer that served it or None)
        self.bases = []  # (client, step) of every base loaded
        self.kept_base = {}  # client -> (step, params) of its base
        self.applies = []  # (client, step, commitments applied)
        self.verifies = []  # (verifier, step, result, the trainer's result of step - 1)

    def add_client(self) -> int:
        k = len(self.ids)
        ident = Identity(hashlib.sha256(b"client%d" % k).digest())
        self.ids.append(ident)
        self.sms.append(ClientStateMachine(ident.public, ident.public,
                                           can_store=k in self.can_store))
        return k

    def params_of(self, who, step):
        """The hash `who` has after applying `step`: the run's, unless its Apply goes wrong."""
        if (who, step) in self.wrong:
            return hashlib.sha256(b"wrong/%d" % step).digest()
        return sim_params(step + 2)

    def fetch(self, who, step, exclude):
        """A peer's applied set, from the run's Active or WarmingUp clients."""
        for k, other in enumerate(self.sms):
            i = self.state.client_index(self.ids[k].public)
            if k == who or str(k) in exclude or i is None or not self.state.clients[i].trains:
                continue
            got = other.kept_set(step)
            if got is not None and k == self.liar and got.results:
                got = replace(got, results=got.results[:-1])
            if got is not None:
                return got, str(k)
        return None, None
    def _apply(self, op, args):
        nxt = apply(self.state, self.t, op, **args)
        try:
            nxt = apply(nxt, self.t, "tick")
        except CoordinatorError:
            pass
        self.state = nxt

    def _do(self, who, actions):
        queue = [(who, a) for a in actions]
        while queue:
            who, act = queue.pop(0)
            sm = self.sms[who]
            match act:
                case Send(op, args):
                    self.sent.append((who, op))
                    self.sent_args.append((who, op, args))
                    before = self.state
                    try:
                        self._apply(op, args)
                        more = sm.op_finished(op, None, args)
                    except CoordinatorError as e:
                        self.rejected.append((who, op, e.code))
                        more = sm.op_finished(op, e.code, args)
                    queue += [(who, a) for a in more]
                    if self.state is not before:
                        for k, other in enumerate(self.sms):
                            queue += [(k, a) for a in other.on_state(self.state, self.t)]
                case Prepare(epoch):
                    self.hashes[who] = sim_params(self.state.step)
                    queue += [(who, a) for a in sm.model_ready(epoch, sim_params(self.state.step))]
                case Apply(step, results):
                    self.applies.append((who, step, [r.commitment for r in results]))
                    params = self.params_of(who, step)
                    if self.chained:
                        params = hashlib.sha256(self.hashes[who] + b"".join(
                            r.commitment for r in results)).digest()
                        self.hashes[who] = params
                    queue += [(who, a) for a in sm.applied_params(step, params)]
                case LoadBase():
                    ck = self.state.checkpoint
                    step, params = (ck.step, ck.hash) if any(ck.hash) else (1, sim_params(1))
                    self.kept_base[who] = (step, params)
                    self.bases.append((who, step))
                    self.hashes[who] = params
                    queue += [(who, a) for a in sm.base_ready(step, params)]
                case ResetToBase():
                    step, params = self.kept_base[who]
                    self.bases.append((who, step))
                    self.hashes[who] = params
                    queue += [(who, a) for a in sm.base_ready(step, params)]
                case FetchResults(step):
                    self.fetches.append((who, step, "results"))
                    for k, other in enumerate(self.sms):
                        if k != who:
                            for r in other.received_results(step):
                                queue.append((who, ("result", r)))
                case ("result", r):
                    queue += [(who, a) for a in sm.on_result(r)]
                case FetchApplied(step, exclude):
                    got, peer = self.fetch(who, step, exclude)
                    self.fetches.append((who, step, peer))
                    queue += [(who, a) for a in sm.fetched(step, got, peer)]
                case StoreSnapshot(_, step, upload) as snap:
                    # captured after the applies asked for before it: the last reported hash
                    params = sm.params if who not in self.forked else sim_params(-step)
                    self.snapshots.append((who, snap, params))
                    if upload:
                        location = hashlib.sha256(b"snapshot/%d/%s" % (step, params)).hexdigest()
                        queue += [(who, a) for a in sm.snapshot_stored(step, params, location)]
                case Log(text):
                    self.logs.append((who, text))
                case Train(step, batch):
                    payload = dummy_payload("sim", step, batch)
                    if who in self.garbage:
                        payload = hashlib.sha256(payload).digest()[:20]
                    if who in self.oversize:
                        payload = bytes(OVERSIZE)
                    result = TrainingResult.create(self.ids[who], step, batch, payload)
                    queue += [(who, a) for a in sm.trained(step, result)]
                case Verify(step, r, _, previous):
                    self.verifies.append((who, step, r, previous))
                    bad = r.trainer in {self.ids[k].public for k in self.harmful}
                    queue += [(who, a) for a in sm.verified(step, r, bad, "sim")]
                case Validate(r):  # what DummyTrainer.validate checks
                    ok = r.payload == dummy_payload("sim", r.step, r.batch)
                    why = "" if ok else "not the batch's simulated result"
                    queue += [(who, a) for a in sm.validated(r, why, None)]
                case Publish(result) if who not in self.silent:
                    self.published.append(result)
                    for k, other in enumerate(self.sms):
                        if k != who and (k, who) not in self.deaf:
                            queue += [(k, a) for a in other.on_result(result)]

    def run(self, until, limit=400):
        for _ in range(limit):
            for k, sm in enumerate(self.sms):
                self._do(k, sm.on_state(self.state, self.t))
            if until(self.state):
                return self.state
            self.t += 1
        raise AssertionError(f"not reached: {self.state.run_state.name} step {self.state.step}")


def test_clients_alone_drive_a_run_to_the_end():
    sim = Sim(4)
    end = sim.run(lambda s: s.run_state == RunState.Finished)
    assert end.epoch >= 2 and end.step > CONFIG.total_steps
    ops = {op for _, op in sim.sent}
    assert {"join", "warmup_witness", "witness", "tick"} <= ops
    assert "health_check" not in ops  # everyone delivered
    # nothing the clients sent was refused, except ticks that raced another tick
    assert [r for r in sim.rejected if r[1] != "tick"] == []


def test_a_silent_trainer_is_dropped_by_health_check():
    sim = Sim(4, silent={3})
    victim = sim.ids[3].public
    st = sim.run(lambda s: s.client_index(victim) is not None
                 and s.clients[s.client_index(victim)].state == ClientState.Dropped)
    assert st.run_state in (RunState.RoundTrain, RunState.RoundWitness)
    assert any(op == "health_check" for who, op in sim.sent if who != 3)
    # the next round of the epoch goes on without it
    nxt = sim.run(lambda s: s.epoch > st.epoch or (
        s.run_state in (RunState.RoundTrain, RunState.RoundWitness) and s.step > st.step))
    if nxt.epoch == st.epoch:
        assert not nxt.current_round.participants >> st.client_index(victim) & 1
        assert nxt.healthy_count() == 3
    # a dropped client may join again for a later epoch, and is checked again there
    again = sim.run(lambda s: s.epoch > st.epoch and s.run_state == RunState.RoundWitness)
    assert victim in {c.signer for c in again.clients}


def test_tampered_and_misassigned_results_are_dropped():
    sim = Sim(4)
    sim.run(lambda s: s.run_state in (RunState.RoundTrain, RunState.RoundWitness)
            and s.current_round.height >= 1)
    st = sim.state
    sm = ClientStateMachine(b"o" * 32, b"o" * 32)  # an observer: no batch of the round decided
    sm.on_state(st, sim.t)
    owner, batch = next(iter(sm.assignments[st.step].items()))
    owner_id = next(i for i in sim.ids if i.public == st.clients[owner].signer)
    thief_id = next(i for i in sim.ids if i.public != owner_id.public)
    good = TrainingResult.create(owner_id, st.step, batch, b"payload")
    tampered = TrainingResult(good.step, good.batch, good.trainer, b"changed", good.commitment,
                              good.signature)
    stolen = TrainingResult.create(thief_id, st.step, batch, b"payload")
    assert sm.on_result(tampered)[0].text.endswith("commitment does not match the payload")
    assert sm.on_result(stolen)[0].text.endswith("not the assigned trainer of that batch")
    assert sum(sm.rejected.values()) == 2 and batch not in sm.results.get(st.step, {})
    assert isinstance(sm.on_result(good)[0], Validate)


def test_snapshot_once_per_epoch_after_its_last_apply():
    """The parameters a joiner gets must be the ones the next epoch starts from: the snapshot
    comes at Cooldown, after the apply of the epoch's last trained round, before any apply of
    the next epoch, tagged with the step the next epoch starts at."""
    sim = Sim(4)
    sm, seen, states = sim.sms[0], [], []
    on_state = sm.on_state

    def recording(st, now):
        acts = on_state(st, now)
        states.append(st)
        seen.extend((st.epoch, st.run_state, st.start_step, a) for a in acts)
        return acts

    sm.on_state = recording
    sim.run(lambda s: s.run_state == RunState.Finished)
    snaps = [(i, x) for i, x in enumerate(seen) if isinstance(x[3], Snapshot)]
    assert len(snaps) >= 2
    assert len({x[0] for _, x in snaps}) == len(snaps)  # one per epoch
    for i, (epoch, run_state, _, snap) in snaps:
        step = snap.step
        assert run_state == RunState.Cooldown
        before = [a.step for _, _, _, a in seen[:i] if isinstance(a, Apply)]
        after = [a.step for _, _, _, a in seen[i:] if isinstance(a, Apply)]
        assert step - 3 in before  # the last trained round (two drain rounds follow it)
        assert all(s >= step for s in after)
        starts = {x[2] for x in seen if x[0] == epoch + 1 and x[1] != RunState.WaitingForMembers}
        assert starts <= {step}  # the next epoch (if any) starts training at that step

    # a client that misses the drain rounds' states applies the epoch's last rounds at Cooldown:
    # in the same list of actions, before the snapshot
    late = ClientStateMachine(sim.ids[0].public, sim.ids[0].public)
    for r in sim.published:  # it received every result (kept until it sees their rounds)
        late.on_result(r)
    acts = []
    for st in states:
        if st.run_state.active and st.last_step and st.step >= st.last_step - 2 \
                and st.run_state != RunState.Cooldown:
            continue
        new = late.on_state(st, 0)
        for a in list(new):
            if isinstance(a, Prepare):  # its model is ready at once
                new += late.model_ready(a.epoch, sim_params(st.step))
        for a in list(new):
            if isinstance(a, Validate):  # the results it kept are checked once their round is
                new += late.validated(a.result, "", None)
        acts += new
    kinds = [(type(a), a.step) for a in acts if isinstance(a, (Apply, Snapshot))]
    assert sum(k is Snapshot for k, _ in kinds) == len(snaps)
    for i, (kind, step) in enumerate(kinds):
        if kind is Snapshot:
            assert (Apply, step - 3) in kinds[:i] and (Apply, step - 4) in kinds[:i]
            assert all(s >= step for k, s in kinds[i:] if k is Apply)


def test_checkpointers_record_snapshots_at_cooldown_and_every_interval():
    """Checkpointers snapshot the parameters every checkpoint_interval steps (those the
    witnesses of that step commit) and at Cooldown (the epoch's final ones); each is recorded
    once its (step, hash) is agreed, the first Cooldown record ends the Cooldown (60 s here),
    and every record asks for a prune."""
    config = replace(CONFIG, checkpoint_interval=4, cooldown_time=60)
    sim = Sim(4, config=config, can_store={0, 1})
    cooldowns = {}  # epoch -> the times its Cooldown was seen

    def until(s):
        if s.run_state == RunState.Cooldown:
            cooldowns.setdefault(s.epoch, []).append(sim.t)
        return s.run_state == RunState.Finished
    end = sim.run(until)
    # the last Cooldown's first record ends the run: the other checkpointer's comes too late
    assert [r for r in sim.rejected if r[1] != "tick"] in ([], [(1, "checkpoint", "Halted")],
                                                          [(0, "checkpoint", "Halted")])
    assert {who for who, _, _ in sim.snapshots} == {0, 1}  # only those that can write
    for who, snap, params in sim.snapshots:
        assert snap.upload and params == sim_params(snap.step)  # the parameters of that step
    steps = {snap.step for _, snap, _ in sim.snapshots}
    assert {4, 8, 12} <= steps and any(s % 4 for s in steps)  # intervals and Cooldowns
    recorded = [(who, args) for who, op, args in sim.sent_args if op == "checkpoint"]
    assert {a["step"] for _, a in recorded} == steps
    assert end.checkpoint.step == max(steps) and end.checkpoint.hash == sim_params(max(steps))
    assert all(max(ts) - min(ts) <= 2 for ts in cooldowns.values()), cooldowns
    for k in (0, 1):
        assert {step for step, _ in sim.sms[k].checkpointing.recorded} >= steps - {max(steps)}


def test_a_checkpointer_whose_hash_differs_never_records_it():
    config = replace(CONFIG, checkpoint_interval=4)
    sim = Sim(4, config=config, can_store={0}, forked={0})
    sim.run(lambda s: s.run_state == RunState.Finished)
    assert sim.snapshots and not [op for who, op, _ in sim.sent_args if op == "checkpoint"]
    why = [text for who, text in sim.logs if "not recording" in text]
    assert why and all("the witnesses agreed on" in t for t in why)
    assert sim.sms[0].checkpointing.recorded == []
