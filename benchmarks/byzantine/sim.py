"""One run in one process: the real coordinator core, a real ClientStateMachine and a real
DistroTrainer per client, and a synchronous, deterministic shell in the daemon's place.

The shell does what `psyche_client/client/daemon.py`'s `_run` does for every action, but at once
and in order: Send applies the operation to the core at the simulated time (the new state goes to
every machine, the answer to the sender's `op_finished`); Prepare, Train, Apply, Validate,
Verify, Evaluate and Snapshot call the client's trainer; StoreSnapshot and PruneSnapshots go
through the client's SnapshotWriter to the run's store (a local directory, when the spec names
one); Publish hands the result to every other client's `on_result` (the network: everyone gets
everything, instantly); LoadBase, ResetToBase, FetchApplied and FetchResults are served from the
store and the peers' machines and trainers. Adversaries'
Train actions run after everything else queued (they are the slowest clients), so an attack can
see the round's honest results. The clock only moves when nothing is left to do: to the core's
next deadline (`tick_deadline`), where a tick is sent and every machine's timer runs.

What it records: every result published (by whom, whether an attack changed it), the set each
client's trainer applied (after the screen), every base load and the snapshots recorded, the
verifiers' verdicts, the first step at which each client's slot stopped being Healthy, the
results the machines dropped, and a failure (an honest client's apply raising, or the run not
finishing), which ends the run."""

from __future__ import annotations

import hashlib
import time
from collections import deque
from dataclasses import dataclass, field

from psyche_client.client import actions as A
from psyche_client.client.results import TrainingResult
from psyche_client.client.snapshot_writer import SnapshotWriter
from psyche_client.client.state_machine import ClientStateMachine
from psyche_client.identity import Identity
from psyche_client.training.errors import ModelUnavailable
from psyche_client.training.stored import open_run_store
from psyche_client.training.trainer import DistroTrainer
from psyche_client.training.validation import max_payload_bytes
from psyche_coordinator_core import (
    ClientState,
    CoordinatorError,
    RunState,
    apply,
    new_run,
    tick_deadline,
)

T0 = 1_000_000


class RunFailed(Exception):
    pass


@dataclass
class Published:
    step: int
    client: int
    adversary: bool
    attacked: bool  # the attack changed the payload
    warming: bool = False  # its sender was warming up: witnessed, never applied (by design)


@dataclass
class Client:
    index: int
    identity: Identity
    sm: ClientStateMachine
    trainer: DistroTrainer
    attack: object = None  # attacks.Attack, or None for an honest client
    previous: bytes | None = None  # its honest payload of the last step it trained
    removed_at: int | None = None  # the step at which its slot stopped being Healthy
    writer: SnapshotWriter | None = None  # its snapshots' way to the run's store, if it has one
    logs: list = field(default_factory=list)


class _Recorder:
    """The trainer's metrics sink: keeps its held-out losses as (step, loss), the trainers
    whose results its last apply used (after the trainer left out what did not decode or what
    the screen caught), and its verdicts as a verifier (step, trainer key, (sign score, step
    score), bad)."""

    def __init__(self, into: list, verdicts: list):
        self.into, self.verdicts = into, verdicts
        self.applied = None

    def write(self, **record):
        if record.get("event") == "heldout":
            self.into.append((record["step"], record["loss"]))
        elif record.get("event") == "apply":
            self.applied = [bytes.fromhex(t) for t in record["trainers"]]
        elif record.get("event") == "verify":
            self.verdicts.append((record["step"], bytes.fromhex(record["trainer"]),
                                  (record["sign_z"], record["step_gain"]), record["bad"]))


class Sim:
    def __init__(self, config, spec, run_seed: int, adversaries: dict, log=None, run_id="byz",
                 late_joiner_at: int | None = None):
        """`adversaries`: {client index: Attack}; the rest are honest. With a snapshot store in
        the spec every client can checkpoint (StoreSnapshot carried out as the daemon does);
        `late_joiner_at`: an honest client with a fresh key joins once the run reaches that
        step (it loads its base from the recorded snapshot)."""
        self.config, self.spec = config, spec
        self.t = T0
        self.log = log or (lambda s: None)
        self.state = apply(new_run(run_id, config, run_seed), self.t, "resume")
        self.queue = deque()
        self.slow = deque()  # adversaries' trains: after everything else
        self.published = {}  # (step, trainer key) -> Published
        self.applies = []  # (client index, step, [trainer keys] its trainer applied) in order
        self.payloads = {}  # step -> {client index: payload} of honest results published
        self.heldout = {}  # client index -> [(step, loss)]
        self.verdicts = []  # (step, trainer key, scores, bad) of every verifier's judgement
        self.agreed = set()  # every parameter hash the coordinator recorded as agreed
        self.failure = None
        self.adversary_failures = []  # applies that raised on an adversary (its own problem)
        self.run_id, self.clients, self.by_key = run_id, [], {}
        self.sybils = 0  # fresh-key clients that came back for removed adversaries
        self.store = (open_run_store(spec.checkpoint, progress=False)
                      if spec.checkpoint.store else None)
        self.poisoned = set()  # store locations of snapshots an attack changed
        self.recorded = set()  # every snapshot location the coordinator recorded
        self.loads = []  # (client index, recorded location, location loaded or None, why not)
        self.late_joiner_at, self.late_joiner = late_joiner_at, None
        for k in range(config.init_min_clients):
            self._new_client(adversaries.get(k))
        for c in self.clients:
            self._do(c, c.sm.on_state(self.state, self.t))
        self._drain()

    def _new_client(self, attack) -> Client:
        k = len(self.clients)
        ident = Identity(hashlib.sha256(b"byzantine/client/%d" % k).digest())
        trainer = DistroTrainer(self.spec, self.run_id, ident, log=lambda s: None,
                                metrics=_Recorder(self.heldout.setdefault(k, []), self.verdicts),
                                micro_batch_size=8)
        # the daemon's bound: what an honest payload of this model can weigh at most
        sm = ClientStateMachine(ident.public, ident.public, can_store=self.store is not None,
                                max_payload=max_payload_bytes(trainer.layout))
        c = Client(k, ident, sm, trainer, attack)
        if self.store is not None:
            c.writer = SnapshotWriter(self.run_id, store=self.store, keep=self.spec.checkpoint.keep)
        self.clients.append(c)
        self.by_key[ident.public] = c
        return c

    # ------------------------------------------------------------------ the daemon's role
    def _do(self, c: Client, actions) -> None:
        for a in actions or []:
            if isinstance(a, A.Train) and c.attack is not None:
                self.slow.append((c, a))
            else:
                self.queue.append((c, a))

    def _drain(self) -> None:
        while self.queue or self.slow:
            c, act = self.queue.popleft() if self.queue else self.slow.popleft()
            self._do(c, self._carry_out(c, act))

    def _set_state(self, nxt) -> None:
        if nxt is self.state:
            return
        self.state = nxt
        self.agreed.add(nxt.param_hash)
        if nxt.checkpoint.repo:
            self.recorded.add(nxt.checkpoint.repo)
        for i, slot in enumerate(nxt.clients):
            c = self.by_key.get(slot.signer)
            if c is not None and slot.state != ClientState.Healthy and c.removed_at is None:
                c.removed_at = nxt.step
                self.log(f"step {nxt.step}: client {c.index} "
                         f"{'(adversary) ' if c.attack else ''}is {slot.state.name}")
                if c.attack is not None and getattr(c.attack, "sybil", False):
                    # a Sybil: the same adversary comes back at once with a fresh key
                    fresh = self._new_client(type(c.attack)(seed=2000 + len(self.clients)))
                    self.sybils += 1
                    self.log(f"step {nxt.step}: client {c.index} comes back as client "
                             f"{fresh.index} with a fresh key")
        for c in self.clients:
            self._do(c, c.sm.on_state(nxt, self.t))

    def _send(self, c: Client, op: str, args: dict) -> list:
        if op == "witness" and c.attack is not None:
            args = c.attack.witness(args, {"step": args.get("step"), "client": c.index})
        try:
            nxt = apply(self.state, self.t, op, **args)
        except CoordinatorError as e:
            return c.sm.op_finished(op, e.code, args)
        self._set_state(nxt)
        return c.sm.op_finished(op, None, args)

    def _carry_out(self, c: Client, act) -> list:
        sm, tr = c.sm, c.trainer
        match act:
            case A.Send(op, args):
                return self._send(c, op, args)
            case A.Prepare(epoch):
                digest = tr.prepare(epoch, sm.state, None)  # logs the held-out loss it starts at
                return sm.model_ready(epoch, bytes.fromhex(digest) if digest else None)
            case A.Train(step, batch):
                return self._train(c, step, batch)
            case A.Apply(step, results):
                return self._apply(c, step, results)
            case A.Validate(result):  # the daemon's validation thread, at once here
                why, fingerprint = tr.validate(result)
                return sm.validated(result, why, fingerprint)
            case A.Verify(step, result, compare, previous, last):  # an elected verifier's test
                bad, detail = tr.verify(step, result, compare, previous, last)
                return sm.verified(step, result, bad, detail)
            case A.Publish(result):
                for other in self.clients:
                    if other is not c:
                        self._do(other, other.sm.on_result(result))
            case A.Evaluate(epoch, step):
                tr.evaluate(epoch, step)
            case A.Snapshot(step):
                tr.snapshot(step, False)
            case A.LoadBase():
                recorded = sm.state.checkpoint.repo
                try:
                    step, digest = tr.load_base(sm.state)
                except ModelUnavailable as e:  # the daemon: no base, wait for the next snapshot
                    self.loads.append((c.index, recorded, None, str(e)))
                    return sm.base_failed(f"ModelUnavailable: {e}")
                used = tr.base_location
                self.loads.append((c.index, recorded, used, None))
                return sm.base_ready(step, bytes.fromhex(digest))
            case A.StoreSnapshot(epoch, step, upload):
                return self._store_snapshot(c, epoch, step, upload)
            case A.PruneSnapshots():
                if c.writer is not None:
                    c.writer.prune()
            case A.ResetToBase():
                step, digest = tr.reset_to_base()
                return sm.base_ready(step, bytes.fromhex(digest))
            case A.FetchApplied(step, exclude):
                for other in self.clients:
                    if other is c or str(other.index) in exclude:
                        continue
                    got = other.sm.kept_set(step)
                    if got is not None:
                        return sm.fetched(step, got, str(other.index))
                return sm.fetched(step, None, None)
            case A.FetchResults(step):
                acts = []
                for other in self.clients:
                    if other is not c:
                        for r in other.sm.received_results(step):
                            acts += sm.on_result(r)
                return acts
            case A.Log(text):
                c.logs.append(text)
        return []

    def _store_snapshot(self, c: Client, epoch, step, upload) -> list:
        """The daemon's _store_snapshot, at once: capture, write, upload, report. An attack may
        change the files (not the hash it reports: that is what the coordinator checks)."""
        files, digest = c.trainer.capture()
        changed = c.attack.snapshot(files, {"step": step, "client": c.index}) if c.attack else None
        if c.writer is None:
            return []
        path = c.writer.write(epoch, step, digest, changed or files)
        if not upload:
            return []
        location = c.writer.upload(path)
        if location is None:
            return []
        if changed is not None:
            self.poisoned.add(location)
        return c.sm.snapshot_stored(step, bytes.fromhex(digest), location)

    def _train(self, c: Client, step, batch) -> list:
        honest = c.trainer.train(step, batch, c.sm.state)
        payload, attacked = honest, False
        if c.attack is not None:
            ctx = {"step": step, "batch": batch, "client": c.index,
                   "rice": self.spec.optimizer.rice, "peers": dict(self.payloads.get(step, {})),
                   "previous": c.previous}
            out = c.attack.payload(honest, ctx)
            if out is not None:
                payload, attacked = out, True
        else:
            self.payloads.setdefault(step, {})[c.index] = honest
        c.previous = honest
        result = TrainingResult.create(c.identity, step, batch, payload)
        me, st = c.sm.my_index(), self.state
        rnd = next((r for r in (st.round_back(k) for k in range(len(st.rounds)))
                    if r is not None and st.round_step(r) == step), None)
        warming = me is not None and rnd is not None and bool(rnd.warming >> me & 1)
        self.published[(step, c.identity.public)] = Published(step, c.index, c.attack is not None,
                                                              attacked, warming)
        return c.sm.trained(step, result)

    def _apply(self, c: Client, step, results) -> list:
        try:
            digest = c.trainer.apply(step, results)
            self.applies.append((c.index, step, c.trainer.metrics.applied))
        except Exception as e:
            if c.attack is None:
                self.failure = (f"step {step}: client {c.index}'s apply raised "
                                f"{type(e).__name__}: {str(e)[:200]}")
                raise RunFailed(self.failure) from None
            self.adversary_failures.append(f"step {step}: {type(e).__name__}: {str(e)[:120]}")
            return c.sm.applied_params(step, None)
        return c.sm.applied_params(step, bytes.fromhex(digest))

    # ------------------------------------------------------------------ the clock
    def advance(self) -> None:
        """Move the clock to the next deadline (at least one second), tick, run every timer."""
        due = tick_deadline(self.state)
        self.t = max(self.t + 1, due if due is not None else self.t + 1)
        try:
            self._set_state(apply(self.state, self.t, "tick"))
        except CoordinatorError:
            pass
        if (self.late_joiner_at is not None and self.late_joiner is None
                and self.state.step >= self.late_joiner_at):
            self.late_joiner = c = self._new_client(None)
            self.log(f"step {self.state.step}: client {c.index} (honest) joins with a fresh key")
            self._do(c, c.sm.on_state(self.state, self.t))
        for c in self.clients:
            self._do(c, c.sm.on_timer(self.t))
        self._drain()

    def run(self, max_seconds: int, progress=None) -> None:
        """Until the run is Finished; RunFailed when an honest apply raises or time runs out."""
        last_step, started = None, time.time()
        while self.state.run_state != RunState.Finished:
            if self.t - T0 > max_seconds:
                self.failure = (f"stalled: not finished after {max_seconds} simulated seconds "
                                f"(at step {self.state.step}, {self.state.run_state.name})")
                raise RunFailed(self.failure)
            self.advance()
            if progress and self.state.step != last_step:
                last_step = self.state.step
                progress(self.state.step, time.time() - started)
