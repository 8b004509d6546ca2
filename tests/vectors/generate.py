"""Generate the coordinator conformance vectors (tests/vectors/*.json).

Each scenario drives the real Python core through `ops_json` exactly as a replayer would (JSON
arguments -> decode_args -> apply) and records, after every step, the error code (or null), the
state hash and a few summary fields. The Rust program replays the same files and must reproduce
every hash. The format is documented in tests/vectors/README.md.

Deterministic: no clock, no randomness but fixed seeds derived from names. Run as

    python -m tests.vectors.generate [--out DIR]      (or: python tests/vectors/generate.py)

Without --out the files are written next to this script and stale *.json files there are removed.
Every scenario also asserts what it means to show (errors, run states), so a change in the core
that breaks a scenario's intent fails generation loudly instead of silently recording something
else.
"""

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from psyche_coordinator_core import (
    Checkpoint,
    CheckpointKind,
    ClientPhase,
    ClientState,
    CoordinatorError,
    RoundCommittee,
    RunConfig,
    RunState,
    apply,
    assign_batches,
    bloom_of,
    credit,
    new_run,
    pending_credit,
    state_hash,
    verification_sample,
)
from psyche_coordinator_core.bloom import EMPTY_BLOOM
from psyche_coordinator_core.committee import param_quorum, witness_quorum
from psyche_coordinator_core.constants import BLOOM_BYTES
from psyche_coordinator_core.ops_json import checkpoint_to_json, decode_args, encode_args

T0 = 1_700_000_000  # unix seconds of every scenario's first step

BASE_CONFIG = dict(
    warmup_time=5, cooldown_time=5, max_round_train_time=5, round_witness_time=2,
    epoch_time=120, global_batch_size_warmup_tokens=0, total_steps=1000, max_seq_len=512,
    min_clients=2, init_min_clients=3, witness_nodes=0, global_batch_size_start=16,
    global_batch_size_end=16, verification_percent=0, checkpointer_percent=0,
    waiting_for_members_extra_time=3, checkpoint_interval=0, max_clients=256, max_syncing=0,
    kept_rounds=64, sync_warmup_rounds=2, flops_per_token=0, tokens_per_compute_point=1_000_000,
    points_cap=0, presence_points=1, evidence_quorum=2,
)


def sha256(*parts) -> bytes:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
    return h.digest()


def signer(label: int) -> bytes:
    """The 32-byte signer key of client `label`: sha256("psyche-vector/signer/<label>")."""
    return sha256(f"psyche-vector/signer/{label}")


def p2p(label: int) -> bytes:
    """Its p2p identity: sha256("psyche-vector/p2p/<label>")."""
    return sha256(f"psyche-vector/p2p/{label}")


def params(run_id: str, step: int) -> bytes:
    """A stand-in for the parameter hash an honest witness of `step` holds: every honest client
    has the same parameters at the same step, so any deterministic 32 bytes per step will do."""
    return sha256("psyche-vector/params/", run_id, step.to_bytes(4, "little"))


def commitment(run_id: str, step: int, batch, trainer: bytes) -> bytes:
    """A stand-in for the hash of a trainer's result: any deterministic 32 bytes will do."""
    return sha256("psyche-vector/commitment/", run_id, step.to_bytes(4, "little"),
                  batch.start.to_bytes(8, "little"), batch.end.to_bytes(8, "little"), trainer)


_UNSET = object()


class ScenarioError(AssertionError):
    """A scenario did not do what it was written to show."""


class Scenario:
    """Builds one vector file. Clients are named by integer labels; `idx(label)` is the label's
    index in the current epoch's `clients`."""

    def __init__(self, name, description, config=None, checkpoint=None, run_id=None,
                 run_seed=None, layout_version=None):
        cfg = dict(BASE_CONFIG)
        cfg.update(config or {})
        self.name = name
        self.description = description
        self.config = RunConfig(**cfg)
        self.checkpoint = checkpoint or Checkpoint()
        self.run_id = run_id or name[:32]
        self.run_seed = (run_seed if run_seed is not None
                         else int.from_bytes(sha256("psyche-vector/seed/", name)[:8], "little"))
        self.state = new_run(self.run_id, self.config, self.run_seed, self.checkpoint)
        self.layout_version = layout_version  # an account another version of the code made
        if layout_version is not None:
            self.state.layout_version = layout_version
        self.initial_hash = state_hash(self.state)
        self.ledger = {}  # identity -> Points: what settlements credited (outside the state)
        self.t = T0
        self.steps = []
        self._bloom_cache = {}

    # ------------------------------------------------------------------ recording

    def fail(self, msg):
        raise ScenarioError(f"{self.name}, step {len(self.steps)} (t={self.t}): {msg}")

    def do(self, op, dt=0, error=None, state=None, raw_args=_UNSET, at=None, **args):
        """Apply one operation through its JSON form and record it. `error` is the code the
        scenario expects (None: success); `state` the run state it expects afterwards."""
        if at is not None:
            if at < self.t:
                self.fail(f"time would go back to {at}")
            self.t = at
        self.t += dt
        jargs = encode_args(op, args) if raw_args is _UNSET else raw_args
        jargs = json.loads(json.dumps(jargs))  # exactly what the file holds
        before = self.state
        try:
            decoded = decode_args(op, jargs)
            after, code, detail = apply(before, self.t, op, **decoded), None, ""
        except CoordinatorError as e:
            after, code, detail = before, e.code, e.detail
        if code != error:
            self.fail(f"{op} {jargs if len(str(jargs)) < 300 else ''}: expected error {error}, "
                      f"got {code} {detail}")
        if state is not None and after.run_state != state:
            self.fail(f"{op}: expected {state.name}, got {after.run_state.name}")
        self.state = after
        expect = expectation(after, code)
        if op == "settle" and code is None:
            # the backend's half of settling: credit the slot's points to its identity's entry
            moved = pending_credit(before, decoded["index"])
            entry = credit(self.ledger.get(moved.identity), moved, before.config)
            self.ledger[moved.identity] = entry
            expect["credited"] = {"identity": moved.identity.hex(), "presence": moved.presence,
                                  "sequences": moved.sequences}
            expect["entry"] = points_to_json(entry)
        self.steps.append({"time": self.t, "op": op, "args": jargs, "expect": expect})
        return after

    def state_hash_now(self) -> str:
        return state_hash(self.state)

    def to_json(self) -> dict:
        initial = {
            "run_id": self.run_id,
            "run_seed": self.run_seed,
            "config": self.config.to_dict(),
            "checkpoint": checkpoint_to_json(self.checkpoint),
        }
        if self.layout_version is not None:
            initial["layout_version"] = self.layout_version
        return {
            "name": self.name,
            "description": self.description,
            "initial": initial,
            "initial_hash": self.initial_hash,
            "steps": self.steps,
        }

    # ------------------------------------------------------------------ checks

    def check(self, cond, msg="check failed"):
        if not cond:
            self.fail(msg)

    def expect_state(self, rs):
        self.check(self.state.run_state == rs,
                   f"expected {rs.name}, in {self.state.run_state.name}")

    # ------------------------------------------------------------------ clients

    def idx(self, label) -> int:
        i = self.state.client_index(signer(label))
        if i is None:
            self.fail(f"client {label} is not in this epoch")
        return i

    def label_at(self, index) -> int:
        sig = self.state.clients[index].signer
        for label in range(1024):
            if signer(label) == sig:
                return label
        self.fail(f"no label for client index {index}")

    def client_state(self, label):
        return self.state.clients[self.idx(label)].state

    def join(self, *labels, dt=0, error=None, identity=None):
        """`identity`: the label of the contributor identity the joiners act for (a delegation
        the backend checked); none: each its own."""
        extra = {} if identity is None else {"identity": signer(identity)}
        for n, label in enumerate(labels):
            self.do("join", dt=dt if n == 0 else 0, error=error, signer=signer(label),
                    p2p_identity=p2p(label), **extra)

    def settle(self, index, dt=0, error=None):
        return self.do("settle", dt=dt, error=error, index=index)

    def settle_all(self, dt=0):
        """Settle every slot that holds points, in index order."""
        first = True
        for i, c in enumerate(list(self.state.clients)):
            if c.unsettled:
                self.settle(i, dt=dt if first else 0)
                first = False

    def entry(self, label):
        return self.ledger.get(signer(label))

    def withdraw(self, label, dt=0, error=None, state=None):
        return self.do("withdraw", dt=dt, error=error, state=state, signer=signer(label))

    def tick(self, dt=1, error=None, state=None, at=None):
        if state == RunState.Warmup and self.state.run_state == RunState.WaitingForMembers:
            self.settle_all()  # an epoch starts only once the slots' points are settled
        return self.do("tick", dt=dt if at is None else 0, at=at, error=error, state=state)

    def tick_timeout(self, field, state=None):
        """Tick exactly when the current phase's `field` duration has passed (at least 1 s)."""
        s = self.state
        when = max(s.run_state_start + getattr(s.config, field), s.run_state_start + 1, self.t)
        return self.tick(at=when, state=state)

    def resume(self, dt=0, error=None, state=RunState.WaitingForMembers):
        return self.do("resume", dt=dt, error=error, state=None if error else state)

    def pause(self, dt=0, error=None, state=None):
        return self.do("pause", dt=dt, error=error, state=state)

    # ------------------------------------------------------------------ epochs and rounds

    def start_epoch(self, *labels, dt=1):
        """Join `labels` (those not already waiting) and tick into Warmup once the grace passed."""
        new = [label for label in labels if self.state.pending_index(signer(label)) is None]
        self.join(*new, dt=dt)
        self.expect_state(RunState.WaitingForMembers)
        self.settle_all()  # the new epoch reuses the slots: their points are settled first
        s = self.state
        when = max(self.t + 1, s.run_state_start + s.config.waiting_for_members_extra_time)
        self.tick(at=when, state=RunState.Warmup)

    def warmup_all(self, dt=1, state=RunState.RoundTrain):
        """Every healthy client, in index order, says it has loaded the model."""
        first = True
        done = {w.index for w in self.state.current_round.witnesses}
        for i, c in enumerate(list(self.state.clients)):
            if self.state.run_state != RunState.Warmup:
                break
            if c.trains and i not in done:
                self.do("warmup_witness", dt=dt if first else 0, signer=c.signer, index=i)
                first = False
        if state is not None:
            self.expect_state(state)

    def committee(self):
        return RoundCommittee(self.state.current_round, self.state.config.witness_nodes, 0)

    def elected(self) -> list:
        """Client indices elected to witness the current round, in index order."""
        return self.committee().witness_indices()

    def elected_labels(self) -> list:
        return [self.label_at(i) for i in self.elected()]

    def blooms(self, missing=()):
        """(participant_bloom, broadcast_bloom, merkle) a witness of the current round sends:
        the signers (and commitments) of every trainer with a batch in the previous round, minus
        `missing` labels. Empty when the previous round trained nothing."""
        s = self.state
        prev = s.round_back(1)
        if prev is None or not s.round_trains(prev):
            return EMPTY_BLOOM, EMPTY_BLOOM, bytes(32)
        key = (s.epoch, prev.height, prev.random_seed, frozenset(missing))
        if key not in self._bloom_cache:
            miss = {signer(label) for label in missing}
            batches = assign_batches(s.config, prev)
            trainers = [(s.clients[i].signer, batches[i]) for i in sorted(batches)
                        if s.clients[i].signer not in miss]
            commits = [commitment(s.run_id, s.round_step(prev), b, sig) for sig, b in trainers]
            self._bloom_cache[key] = (bloom_of(sig.hex() for sig, _ in trainers),
                                      bloom_of(c.hex() for c in commits),
                                      sha256(b"".join(commits)))
        return self._bloom_cache[key]

    def witness(self, label=None, index=None, missing=(), step=None, dt=0, error=None,
                state=None, participant_bloom=None, broadcast_bloom=None, merkle=None,
                sig=None, param_hash=None):
        """`param_hash` defaults to the honest parameters of the current step (params())."""
        pb, bb, mk = self.blooms(missing)
        if index is None:
            index = self.idx(label)
        return self.do("witness", dt=dt, error=error, state=state,
                       signer=sig if sig is not None else signer(label), index=index,
                       step=self.state.step if step is None else step,
                       participant_bloom=pb if participant_bloom is None else participant_bloom,
                       broadcast_bloom=bb if broadcast_bloom is None else broadcast_bloom,
                       broadcast_merkle=mk if merkle is None else merkle,
                       param_hash=(params(self.run_id, self.state.step) if param_hash is None
                                   else param_hash))

    def witness_all(self, skip=(), missing=(), missing_for=None, dt=1):
        """Every elected witness (index order) but the `skip` labels sends its witness.
        `missing` labels are left out of every bloom, `missing_for` {witness label: labels}
        out of that witness's only."""
        first = True
        for i in self.elected():
            label = self.label_at(i)
            if label in skip or not self.state.clients[i].trains:
                continue
            miss = set(missing) | set((missing_for or {}).get(label, ()))
            self.witness(label, missing=miss, dt=dt if first else 0)
            first = False

    def finish_round(self, state=None):
        """Let a round run out: RoundTrain times out (if no opportunistic end), then
        RoundWitness."""
        if self.state.run_state == RunState.RoundTrain:
            self.tick_timeout("max_round_train_time", state=RunState.RoundWitness)
        self.expect_state(RunState.RoundWitness)
        self.tick_timeout("round_witness_time", state=state)

    def round(self, skip=(), missing=(), missing_for=None, state=None):
        """One full round: witnesses, then the round ends. Returns the state after it."""
        self.expect_state(RunState.RoundTrain)
        self.witness_all(skip=skip, missing=missing, missing_for=missing_for)
        self.finish_round(state=state)
        return self.state

    def rounds_until_cooldown(self, limit=50):
        for _ in range(limit):
            if self.state.run_state == RunState.Cooldown:
                return
            self.round()
        self.fail("no cooldown")

    def end_cooldown(self, state=RunState.WaitingForMembers):
        self.expect_state(RunState.Cooldown)
        self.tick_timeout("cooldown_time", state=state)

    def health_check(self, label, targets, dt=0, error=None):
        """Client `label` names the clients `targets` (labels) as unhealthy."""
        return self.do("health_check", dt=dt, error=error, signer=signer(label),
                       index=self.idx(label), targets=[self.idx(t) for t in targets])

    def checkpoint_op(self, label, repo, revision="", dt=0, error=None, index=None, step=None,
                      param_hash=None, state=None):
        """Record a snapshot; (step, param_hash) default to the latest agreed pair."""
        s = self.state
        return self.do("checkpoint", dt=dt, error=error, state=state, signer=signer(label),
                       index=self.idx(label) if index is None else index, repo=repo,
                       revision=revision, step=s.param_step if step is None else step,
                       param_hash=s.param_hash if param_hash is None else param_hash)

    def phase(self, label):
        return self.state.clients[self.idx(label)].phase

    def synced(self, label, dt=0, error=None, step=None, param_hash=None, state=None):
        """A syncing client reports its parameters; (step, hash) default to the agreed pair."""
        s = self.state
        return self.do("synced", dt=dt, error=error, state=state, signer=signer(label),
                       index=self.idx(label), step=s.param_step if step is None else step,
                       param_hash=s.param_hash if param_hash is None else param_hash)

    def resync(self, label, dt=0, error=None, state=None):
        return self.do("resync", dt=dt, error=error, state=state, signer=signer(label),
                       index=self.idx(label))

    def round_of(self, step):
        return self.state.round_back(self.state.step - step)

    def verifiers(self, step=None) -> list:
        """Labels of the elected verifiers of the round that trains `step` (default: the
        current one), in index order: computed from the committee, never hard-coded."""
        s = self.state
        rnd = self.round_of(s.step if step is None else step)
        cm = RoundCommittee(rnd, s.config.witness_nodes, s.config.verification_percent)
        return [self.label_at(i) for i in cm.verifier_indices()]

    def trainers(self, step=None) -> list:
        """Labels of the clients with a batch in the round that trains `step`, in index order."""
        s = self.state
        rnd = self.round_of(s.step if step is None else step)
        return [self.label_at(i) for i in sorted(assign_batches(s.config, rnd))]

    def evidence(self, label, target, step=None, dt=0, error=None, state=None, index=None):
        """Verifier `label` says trainer `target`'s result for `step` (default: the current
        one) is bad; `target` is a label, or an int index when given as ("index", i)."""
        tgt = target[1] if isinstance(target, tuple) else self.idx(target)
        return self.do("evidence", dt=dt, error=error, state=state, signer=signer(label),
                       index=self.idx(label) if index is None else index,
                       step=self.state.step if step is None else step, target=tgt)

    def sample(self, label, step=None) -> list:
        """Labels of the trainers verifier `label` judges in the round that trains `step`
        (default: the current one): the only targets its evidence may name."""
        s = self.state
        rnd = self.round_of(s.step if step is None else step)
        return [self.label_at(i) for i in verification_sample(s.config, rnd, self.idx(label))]

    def labels_in(self, bits: int) -> set:
        """Labels of the clients whose bit is set in a mask over client indices."""
        return {self.label_at(i) for i in range(len(self.state.clients)) if (bits >> i) & 1}

    def accused(self, step=None) -> set:
        """Labels in the `accused` mask of the round that trains `step` (default: current)."""
        return self.labels_in(self.round_of(self.state.step if step is None else step).accused)

    def accusers(self, label) -> set:
        return self.labels_in(self.state.clients[self.idx(label)].accusers)

    def participants(self) -> set:
        """Labels of the current round's participants."""
        return {self.label_at(i) for i in self.state.current_round.participant_indices()}

    def warming(self) -> set:
        rnd = self.state.current_round
        return {self.label_at(i) for i in range(len(self.state.clients))
                if (rnd.warming >> i) & 1}


def points_to_json(p) -> dict:
    return {"identity": p.identity.hex(), "presence_rounds": p.presence_rounds,
            "sequences": p.sequences, "tokens": p.tokens, "token_carry": p.token_carry,
            "presence_points": p.presence_points, "compute_points": p.compute_points}


def expectation(s, code) -> dict:
    return {
        "error": code,
        "hash": state_hash(s),
        "run_state": s.run_state.name,
        "epoch": s.epoch,
        "step": s.step,
        "clients": len(s.clients),
        "pending": len(s.pending),
        "round_height": s.current_round.height,
        "witnesses": len(s.current_round.witnesses),
        "healthy": s.healthy_count(),
    }


# ====================================================================== scenarios

SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


def started(name, description, labels=(0, 1, 2, 3), config=None, checkpoint=None, **kw):
    """A run resumed, with `labels` joined and warmed up: in the first round (RoundTrain)."""
    sc = Scenario(name, description, config=config, checkpoint=checkpoint, **kw)
    sc.resume(dt=0)
    sc.start_epoch(*labels)
    sc.warmup_all()
    return sc


# ---------------------------------------------------------------- happy paths

@scenario
def happy_path_three_epochs():
    sc = Scenario("happy_path_three_epochs",
                  "4 clients train through three epochs ended by epoch_time (each with the "
                  "2-round drain); everyone rejoins during cooldown; checkpoint Dummy -> P2P.",
                  config=dict(epoch_time=20, min_clients=2, init_min_clients=4))
    labels = (0, 1, 2, 3)
    sc.resume()
    for epoch in range(3):
        sc.start_epoch(*labels)
        sc.warmup_all()
        sc.rounds_until_cooldown()
        sc.check(sc.state.last_step != 0, "epoch should end by draining")
        sc.join(*labels, dt=1)
        sc.end_cooldown()
        sc.check(sc.state.epoch == epoch + 1)
        sc.check(sc.state.checkpoint.kind == CheckpointKind.P2P)
    sc.check(sc.state.step > 12)
    return sc


@scenario
def happy_path_single_client():
    sc = started("happy_path_single_client",
                 "min_clients = init_min_clients = 1: a lone client warms up, witnesses its own "
                 "rounds (quorum 1) and trains a few steps.",
                 labels=(7,), config=dict(min_clients=1, init_min_clients=1))
    for _ in range(5):
        sc.round(state=RunState.RoundTrain)
    sc.check(sc.state.step == 6)
    return sc


@scenario
def ring_buffer_many_rounds():
    sc = started("ring_buffer_many_rounds",
                 "Ten rounds in one epoch: the 4-slot round ring wraps twice; data_index advances "
                 "by the batch size each round.",
                 labels=(0, 1, 2), config=dict(epoch_time=1000))
    for _ in range(10):
        sc.round(state=RunState.RoundTrain)
    sc.check(sc.state.current_round.height == 10 and sc.state.rounds_head == 2)
    sc.check(sc.state.current_round.data_index == 160)
    return sc


@scenario
def joiners_mid_epoch():
    sc = started("joiners_mid_epoch",
                 "New clients join during an epoch: they wait in `pending` and take part only "
                 "from the next epoch, which then has more clients.",
                 labels=(0, 1, 2), config=dict(epoch_time=15))
    sc.join(10, 11, dt=1)
    sc.check(len(sc.state.pending) == 2 and len(sc.state.clients) == 3)
    sc.round()
    sc.join(0, 1, 2, dt=1)
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.start_epoch(0, 1, 2, 10, 11)
    sc.check(len(sc.state.clients) == 5)
    sc.warmup_all()
    sc.round(state=RunState.RoundTrain)
    return sc


# ---------------------------------------------------------------- waiting and warmup

@scenario
def waiting_for_members_grace():
    sc = Scenario("waiting_for_members_grace",
                  "WaitingForMembers needs init_min_clients joined AND waiting_for_members_extra_"
                  "time since the state began; a tick at the same second never times out.",
                  config=dict(init_min_clients=3, waiting_for_members_extra_time=5))
    sc.resume()
    sc.tick(dt=0, state=RunState.WaitingForMembers)
    sc.join(0, 1, dt=1)
    sc.tick(dt=10, state=RunState.WaitingForMembers)  # only 2 of 3
    sc.join(2, dt=1)
    sc.tick(dt=0, state=RunState.Warmup)  # grace counts from entering the state
    return sc


@scenario
def waiting_for_members_grace_exact():
    sc = Scenario("waiting_for_members_grace_exact",
                  "All joins arrive at once; ticks before the extra time do nothing, the tick "
                  "exactly at run_state_start + extra time starts the epoch.",
                  config=dict(init_min_clients=2, waiting_for_members_extra_time=4))
    sc.resume()
    sc.join(0, 1)
    sc.tick(dt=0, state=RunState.WaitingForMembers)
    sc.tick(dt=3, state=RunState.WaitingForMembers)
    sc.tick(dt=1, state=RunState.Warmup)
    return sc


@scenario
def warmup_timeout():
    sc = Scenario("warmup_timeout",
                  "Only some clients send warmup witnesses: at warmup_time the others are "
                  "dropped (killed or too slow: they would hold rounds they cannot train) and "
                  "their joins for the next epoch removed; the first round has only the ready "
                  "ones. A late warmup witness is NotAClient; after the first round, "
                  "InvalidRunState.",
                  config=dict(warmup_time=10, init_min_clients=4))
    sc.resume()
    sc.start_epoch(0, 1, 2, 3)
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0))
    sc.do("warmup_witness", dt=1, signer=signer(1), index=sc.idx(1))
    sc.join(2, 3, dt=1)  # the unready ones had joined the next epoch too
    sc.tick(dt=1, state=RunState.Warmup)
    sc.tick_timeout("warmup_time", state=RunState.RoundTrain)
    sc.check(all(sc.client_state(n) == ClientState.Dropped for n in (2, 3)))
    sc.check(sc.state.current_round.participant_indices() == [sc.idx(0), sc.idx(1)])
    sc.check(len(sc.state.pending) == 0)
    sc.do("warmup_witness", dt=1, signer=signer(2), index=sc.idx(2), error="NotAClient")
    sc.round(state=RunState.RoundTrain)
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0), error="InvalidRunState")
    return sc


@scenario
def warmup_zero_time():
    sc = Scenario("warmup_zero_time",
                  "warmup_time = 0: a tick in the second Warmup began does nothing; one second "
                  "later the first round starts with the clients that were ready (the other is "
                  "dropped).",
                  config=dict(warmup_time=0, init_min_clients=3))
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.tick(dt=0, state=RunState.Warmup)
    sc.do("warmup_witness", signer=signer(0), index=sc.idx(0))
    sc.do("warmup_witness", signer=signer(1), index=sc.idx(1), state=RunState.Warmup)
    sc.tick(dt=1, state=RunState.RoundTrain)
    sc.check(sc.client_state(2) == ClientState.Dropped)
    return sc


@scenario
def warmup_witness_early_start():
    sc = Scenario("warmup_witness_early_start",
                  "Warmup ends as soon as min(healthy, 32) clients sent warmup_witness; a "
                  "duplicate warmup witness is rejected.",
                  config=dict(warmup_time=100))
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0))
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0), error="DuplicateWitness")
    sc.do("warmup_witness", dt=1, signer=signer(1), index=sc.idx(1), state=RunState.Warmup)
    sc.do("warmup_witness", dt=1, signer=signer(2), index=sc.idx(2), state=RunState.RoundTrain)
    return sc


# ---------------------------------------------------------------- drop-outs by phase

@scenario
def withdraw_waiting_for_members():
    sc = Scenario("withdraw_waiting_for_members",
                  "A joiner withdraws while waiting: it leaves `pending`, so the epoch waits until "
                  "enough clients are there again; a second withdraw is InvalidWithdraw.")
    sc.resume()
    sc.join(0, 1, 2, dt=1)
    sc.withdraw(1, dt=1)
    sc.withdraw(1, dt=0, error="InvalidWithdraw")
    sc.tick(dt=5, state=RunState.WaitingForMembers)
    sc.join(3, dt=1)
    sc.tick(dt=1, state=RunState.Warmup)
    sc.check(sc.state.client_index(signer(1)) is None)
    return sc


@scenario
def withdraw_warmup():
    sc = Scenario("withdraw_warmup",
                  "A client withdraws during Warmup; the others still reach min(healthy, 32) "
                  "warmup witnesses and start training without it.")
    sc.resume()
    sc.start_epoch(0, 1, 2, 3)
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0))
    sc.withdraw(2, dt=1, state=RunState.Warmup)
    sc.check(sc.client_state(2) == ClientState.Withdrawn)
    sc.do("warmup_witness", dt=1, signer=signer(2), index=sc.idx(2), error="NotAClient")
    sc.warmup_all()
    sc.check(not (sc.state.current_round.participants >> sc.idx(2)) & 1)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def withdraw_round_train():
    sc = started("withdraw_round_train",
                 "An elected witness withdraws during RoundTrain: it cannot witness, so the round "
                 "is not witnessed opportunistically and ends at max_round_train_time; the next "
                 "round's participants exclude it.",
                 labels=(0, 1, 2, 3))
    gone = sc.elected_labels()[0]
    sc.withdraw(gone, dt=1, state=RunState.RoundTrain)
    sc.witness(gone, dt=1, error="NotAClient")
    sc.witness_all()
    sc.expect_state(RunState.RoundTrain)
    sc.finish_round(state=RunState.RoundTrain)
    sc.check(not (sc.state.current_round.participants >> sc.idx(gone)) & 1)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def withdraw_round_witness():
    sc = started("withdraw_round_witness",
                 "A client withdraws during RoundWitness (after opportunistic witnessing); the "
                 "round still ends normally and the next round has one participant fewer.",
                 labels=(0, 1, 2, 3))
    sc.round(state=RunState.RoundTrain)
    sc.witness_all()
    sc.expect_state(RunState.RoundWitness)
    sc.withdraw(1, dt=1, state=RunState.RoundWitness)
    sc.finish_round(state=RunState.RoundTrain)
    sc.check(len(sc.state.current_round.participant_indices()) == 3)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def withdraw_cooldown():
    sc = started("withdraw_cooldown",
                 "During Cooldown a client that already rejoined for the next epoch withdraws: "
                 "it is marked Withdrawn and removed from `pending`; the next epoch goes on "
                 "without it.",
                 labels=(0, 1, 2, 3), config=dict(epoch_time=10))
    sc.rounds_until_cooldown()
    sc.join(0, 1, 2, 3, dt=1)
    sc.withdraw(3, dt=1, state=RunState.Cooldown)
    sc.check(sc.client_state(3) == ClientState.Withdrawn and len(sc.state.pending) == 3)
    sc.end_cooldown()
    sc.start_epoch()
    sc.check(len(sc.state.clients) == 3)
    sc.warmup_all()
    return sc


@scenario
def below_min_clients_warmup():
    sc = Scenario("below_min_clients_warmup",
                  "Two of three clients withdraw in Warmup (min_clients 2): the next tick returns "
                  "to WaitingForMembers; the clients must join again.",
                  config=dict(min_clients=2, init_min_clients=3))
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.withdraw(0, dt=1)
    sc.tick(dt=1, state=RunState.Warmup)
    sc.withdraw(1, dt=1)
    sc.tick(dt=1, state=RunState.WaitingForMembers)
    sc.tick(dt=10, state=RunState.WaitingForMembers)
    sc.start_epoch(0, 1, 2)
    sc.warmup_all()
    return sc


@scenario
def warmup_ready_after_withdraw():
    sc = Scenario("warmup_ready_after_withdraw",
                  "Warmup ends as soon as every healthy client is ready. A warmup witness from a "
                  "client that left since does not count (two of three healthy ready: still "
                  "Warmup); when the last client not ready leaves instead of sending one, the next "
                  "tick starts the first round without waiting for warmup_time.",
                  config=dict(min_clients=2, init_min_clients=4, warmup_time=100))
    sc.resume()
    sc.start_epoch(0, 1, 2, 3)
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0), state=RunState.Warmup)
    sc.do("warmup_witness", signer=signer(3), index=sc.idx(3), state=RunState.Warmup)
    sc.withdraw(3, dt=1, state=RunState.Warmup)
    sc.do("warmup_witness", signer=signer(1), index=sc.idx(1), state=RunState.Warmup)
    sc.tick(dt=1, state=RunState.Warmup)
    sc.withdraw(2, dt=1, state=RunState.Warmup)
    sc.tick(dt=1, state=RunState.RoundTrain)
    return sc


@scenario
def warmup_witness_below_min_clients():
    sc = Scenario("warmup_witness_below_min_clients",
                  "With healthy clients below min_clients, a warmup witness is accepted but does "
                  "not start a round (even though every healthy client has sent one); the next "
                  "tick ends the warmup and returns to WaitingForMembers.",
                  config=dict(min_clients=2, init_min_clients=3, warmup_time=100))
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.withdraw(0, dt=1)
    sc.withdraw(1, dt=0)
    sc.do("warmup_witness", dt=1, signer=signer(2), index=sc.idx(2), state=RunState.Warmup)
    sc.tick(dt=1, state=RunState.WaitingForMembers)
    return sc


@scenario
def below_min_clients_round():
    sc = started("below_min_clients_round",
                 "min_clients 3, three clients; one withdraws mid-round. The others still reach "
                 "quorum, but with 2 healthy < 3 the round ends in Cooldown.",
                 labels=(0, 1, 2), config=dict(min_clients=3, init_min_clients=3))
    sc.round(state=RunState.RoundTrain)
    sc.withdraw(sc.elected_labels()[-1], dt=1)
    sc.round(state=RunState.Cooldown)
    sc.check(sc.state.healthy_count() == 2)
    sc.end_cooldown()
    return sc


# ---------------------------------------------------------------- witnessing and quorum

@scenario
def no_quorum_cooldown():
    sc = started("no_quorum_cooldown",
                 "4 clients, all 4 elected witnesses, quorum 2: only one witnesses, the round "
                 "times out and the epoch goes to Cooldown (clients stay healthy).",
                 labels=(0, 1, 2, 3))
    sc.round(state=RunState.RoundTrain)
    sc.check(witness_quorum(len(sc.elected())) == 2)
    sc.witness(sc.elected_labels()[0], dt=1)
    sc.finish_round(state=RunState.Cooldown)
    sc.check(sc.state.healthy_count() == 4)
    sc.end_cooldown()
    return sc


@scenario
def zero_witnesses_cooldown():
    sc = started("zero_witnesses_cooldown",
                 "Nobody witnesses a round: RoundTrain times out, RoundWitness times out, every "
                 "client is withdrawn and the epoch cools down; a new epoch needs new joins.",
                 labels=(0, 1, 2, 3))
    sc.round(state=RunState.RoundTrain)
    sc.finish_round(state=RunState.Cooldown)
    sc.check(sc.state.healthy_count() == 0)
    sc.check(all(c.state == ClientState.Withdrawn for c in sc.state.clients))
    sc.end_cooldown()
    sc.start_epoch(0, 1, 2)
    sc.warmup_all()
    return sc


@scenario
def zero_witnesses_first_round():
    sc = started("zero_witnesses_first_round",
                 "Nobody witnesses the very first round of an epoch: all withdrawn, Cooldown, "
                 "next epoch (epoch counter still advances, checkpoint goes P2P).",
                 labels=(0, 1), config=dict(init_min_clients=2))
    sc.finish_round(state=RunState.Cooldown)
    sc.end_cooldown()
    sc.check(sc.state.epoch == 1 and sc.state.step == 2)
    return sc


@scenario
def max_train_time_fallback():
    sc = started("max_train_time_fallback",
                 "Three of four witnesses send (a quorum, not all): RoundTrain ends only at "
                 "max_round_train_time; the fourth witness arrives late in RoundWitness and is "
                 "accepted; the next round starts.",
                 labels=(0, 1, 2, 3))
    late = sc.elected_labels()[-1]
    sc.witness_all(skip=(late,))
    sc.tick(dt=1, state=RunState.RoundTrain)
    sc.tick_timeout("max_round_train_time", state=RunState.RoundWitness)
    sc.witness(late, dt=1, state=RunState.RoundWitness)
    sc.tick_timeout("round_witness_time", state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def opportunistic_witnessing():
    sc = started("opportunistic_witnessing",
                 "Every elected witness sends: RoundTrain ends at once (no wait for "
                 "max_round_train_time); ticks before round_witness_time do nothing; a second "
                 "witness from the same client is DuplicateWitness.",
                 labels=(0, 1, 2, 3, 4), config=dict(witness_nodes=2))
    labels = sc.elected_labels()
    sc.check(len(labels) == 2)
    sc.witness(labels[0], dt=1, state=RunState.RoundTrain)
    sc.witness(labels[1], dt=1, state=RunState.RoundWitness)
    sc.witness(labels[0], dt=0, error="DuplicateWitness")
    sc.tick(dt=1, state=RunState.RoundWitness)
    sc.tick(dt=1, state=RunState.RoundTrain)
    for _ in range(3):
        sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def witness_nodes_one():
    sc = started("witness_nodes_one",
                 "witness_nodes = 1: exactly one elected witness per round (quorum 1); others get "
                 "NotAWitness; the single witness ends RoundTrain at once.",
                 labels=(0, 1, 2), config=dict(witness_nodes=1, min_clients=1, init_min_clients=3))
    for _ in range(4):
        (w,) = sc.elected_labels()
        other = next(label for label in (0, 1, 2) if label != w)
        sc.witness(other, dt=1, error="NotAWitness")
        sc.witness(w, dt=0, state=RunState.RoundWitness)
        sc.finish_round(state=RunState.RoundTrain)
    return sc


@scenario
def epoch_time_drain():
    sc = started("epoch_time_drain",
                 "epoch_time passes: the round that ends after it sets last_step = step + 2; two "
                 "more rounds run without training. The first drain round's witnesses still "
                 "vouch for the last training round (one trainer left out and dropped by a health "
                 "check in the second drain round); the second drain round's blooms are empty. "
                 "The epoch cools down at step == last_step.",
                 labels=(0, 1, 2, 3), config=dict(epoch_time=12, warmup_time=5))
    while sc.state.last_step == 0:
        sc.round()
    sc.expect_state(RunState.RoundTrain)
    drain_from = sc.state.step
    sc.check(sc.state.last_step == drain_from + 2)
    sc.check(not sc.state.round_trains(sc.state.current_round))
    sc.round(missing=(3,), state=RunState.RoundTrain)  # first drain round
    sc.check(sc.state.step == drain_from + 1)
    sc.check(sc.blooms()[0] == EMPTY_BLOOM)
    sc.health_check(0, [1], dt=1, error="InvalidHealthCheck")
    sc.health_check(0, [3])
    sc.round(state=RunState.Cooldown)  # second drain round
    sc.check(sc.state.step == sc.state.last_step)
    sc.end_cooldown()
    return sc


@scenario
def total_steps_finished():
    sc = started("total_steps_finished",
                 "total_steps = 3: after step 3 trains, the epoch drains (2 rounds) and cools "
                 "down; the run is Finished. Then every operation is refused.",
                 labels=(0, 1, 2), config=dict(total_steps=3))
    for _ in range(3):
        sc.round(state=RunState.RoundTrain)
    sc.check(sc.state.last_step == 6)
    sc.round(state=RunState.RoundTrain)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Finished)
    sc.tick(dt=1, error="Halted")
    sc.join(5, dt=1, error="RunFinished")
    sc.withdraw(0, error="RunFinished")
    sc.resume(error="CannotResume")
    sc.pause(error="Halted")
    sc.do("update", error="RunFinished", config=RunConfig(**{**BASE_CONFIG, "total_steps": 9}))
    sc.do("update", raw_args={}, error="RunFinished")
    sc.do("warmup_witness", signer=signer(0), index=0, error="Halted")
    sc.witness(0, index=0, error="Halted")
    sc.do("health_check", signer=signer(0), index=0, targets=[1], error="Halted")
    sc.do("checkpoint", signer=signer(0), index=0, repo="org/model", revision="", step=9,
          param_hash=params(sc.run_id, 9), error="Halted")
    return sc


@scenario
def total_steps_one():
    sc = started("total_steps_one",
                 "total_steps = 1 reached in the first round of the first epoch, even though the "
                 "epoch time is far off.",
                 labels=(0, 1), config=dict(total_steps=1, init_min_clients=2, epoch_time=10000))
    sc.round(state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Finished)
    return sc


@scenario
def total_steps_across_epochs():
    sc = started("total_steps_across_epochs",
                 "total_steps = 8 spread over two epochs (epoch_time ends the first); the second "
                 "epoch drains at the step limit and the run finishes.",
                 labels=(0, 1, 2), config=dict(total_steps=8, epoch_time=8, warmup_time=2))
    sc.rounds_until_cooldown()
    sc.join(0, 1, 2, dt=1)
    sc.end_cooldown()
    sc.check(sc.state.step <= 8)
    sc.start_epoch()
    sc.warmup_all()
    sc.rounds_until_cooldown()
    sc.end_cooldown(state=RunState.Finished)
    return sc


# ---------------------------------------------------------------- pause and resume

@scenario
def pause_waiting_for_members():
    sc = Scenario("pause_waiting_for_members",
                  "Pause while waiting for members goes straight to Paused (joiners stay in "
                  "`pending`); resume returns to WaitingForMembers and the epoch starts.",
                  config=dict(init_min_clients=2))
    sc.resume()
    sc.join(0, 1, dt=1)
    sc.pause(dt=1, state=RunState.Paused)
    sc.tick(dt=10, error="Halted")
    sc.pause(dt=0, error="Halted")
    sc.join(2, dt=1)
    sc.resume(dt=1)
    sc.tick(dt=1, state=RunState.WaitingForMembers)
    sc.tick_timeout("waiting_for_members_extra_time", state=RunState.Warmup)
    sc.check(len(sc.state.clients) == 3)
    return sc


@scenario
def pause_warmup():
    sc = Scenario("pause_warmup",
                  "Pause during Warmup: every client is withdrawn and the run is Paused (epoch and "
                  "step unchanged); after resume the clients join again and train.")
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0))
    sc.pause(dt=1, state=RunState.Paused)
    sc.check(sc.state.healthy_count() == 0)
    sc.do("warmup_witness", dt=1, signer=signer(1), index=sc.idx(1), error="Halted")
    sc.resume(dt=5)
    sc.start_epoch(0, 1, 2)
    sc.warmup_all()
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.state.epoch == 0)
    return sc


@scenario
def pause_mid_round():
    sc = started("pause_mid_round",
                 "Pause during RoundTrain only sets pending_pause: the round finishes (with "
                 "quorum), then Cooldown instead of the next round, then Paused (epoch + 1, "
                 "clients withdrawn). Resume and a new epoch follow.",
                 labels=(0, 1, 2, 3))
    sc.round(state=RunState.RoundTrain)
    sc.pause(dt=1, state=RunState.RoundTrain)
    sc.check(sc.state.pending_pause)
    sc.pause(dt=1, state=RunState.RoundTrain)  # again: still just pending
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    sc.check(not sc.state.pending_pause and sc.state.epoch == 1)
    sc.resume(dt=30)
    sc.start_epoch(0, 1, 2, 3)
    sc.warmup_all()
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def pause_round_witness():
    sc = started("pause_round_witness",
                 "Pause during RoundWitness: the round ends in Cooldown, then Paused.",
                 labels=(0, 1, 2))
    sc.witness_all()
    sc.pause(dt=1, state=RunState.RoundWitness)
    sc.finish_round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    sc.resume(dt=1)
    return sc


@scenario
def pause_cooldown():
    sc = started("pause_cooldown",
                 "Pause during Cooldown: the cooldown finishes, then Paused instead of "
                 "WaitingForMembers; joins made during cooldown survive the pause.",
                 labels=(0, 1, 2), config=dict(epoch_time=8))
    sc.rounds_until_cooldown()
    sc.join(0, 1, 2, dt=1)
    sc.pause(dt=1, state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    sc.check(len(sc.state.pending) == 3)
    sc.resume(dt=100)
    sc.tick(dt=3, state=RunState.WaitingForMembers)  # the slots' points are not settled yet
    sc.settle_all()
    sc.tick(dt=1, state=RunState.Warmup)
    return sc


@scenario
def pause_update_resume():
    sc = started("pause_update_resume",
                 "While Paused the authority updates the config (witness_nodes 1, longer epoch) "
                 "and the checkpoint (Hub); after resume the new config applies.",
                 labels=(0, 1, 2))
    sc.round(state=RunState.RoundTrain)
    sc.pause(dt=1)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    cfg = RunConfig(**{**BASE_CONFIG, "witness_nodes": 1, "epoch_time": 300, "min_clients": 1})
    sc.do("update", dt=1, config=cfg, error="PointsUnsettled")  # earned at the old rates
    sc.settle_all(dt=1)
    sc.do("update", dt=1, config=cfg)
    sc.do("update", dt=1, checkpoint=Checkpoint(CheckpointKind.Hub, "org/model", "rev-1"))
    sc.do("update", dt=1, raw_args={})
    sc.check(sc.state.checkpoint.kind == CheckpointKind.Hub)
    sc.resume(dt=1)
    sc.start_epoch(3, 4, 5)
    sc.check(sc.state.checkpoint.kind == CheckpointKind.Hub)
    sc.warmup_all()
    sc.check(len(sc.elected()) == 1)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def pause_during_drain():
    sc = started("pause_during_drain",
                 "Pause in the first drain round: the drain is cut short, Cooldown follows at "
                 "once, then Paused.",
                 labels=(0, 1, 2), config=dict(epoch_time=8, warmup_time=2))
    while sc.state.last_step == 0:
        sc.round()
    sc.pause(dt=1)
    sc.round(state=RunState.Cooldown)
    sc.check(sc.state.step < sc.state.last_step)
    sc.end_cooldown(state=RunState.Paused)
    return sc


@scenario
def uninitialized_run():
    sc = Scenario("uninitialized_run",
                  "A fresh run is Uninitialized: tick, pause and witness are Halted, join is "
                  "accepted (for the first epoch), update is allowed; resume opens it.")
    sc.tick(dt=1, error="Halted")
    sc.pause(error="Halted")
    sc.do("warmup_witness", signer=signer(0), index=0, error="Halted")
    sc.join(0, 1, 2, dt=1)
    sc.do("update", dt=1, config=RunConfig(**{**BASE_CONFIG, "warmup_time": 3}))
    sc.resume(dt=1)
    sc.resume(error="CannotResume")
    sc.tick(dt=3, state=RunState.Warmup)
    sc.warmup_all(dt=1, state=RunState.RoundTrain)
    return sc


@scenario
def update_spec_hash():
    sc = Scenario("update_spec_hash",
                  "The authority sets the run spec's hash while the run is Uninitialized and "
                  "again while Paused; a running run refuses it (UpdateNotHalted), a hash that "
                  "is not 32 bytes is InvalidOperation, and an update whose config is refused "
                  "leaves the hash unchanged too.")
    first, second = sha256(b"spec-1"), sha256(b"spec-2")
    sc.do("update", dt=1, spec_hash=first)
    sc.check(sc.state.spec_hash == first)
    sc.do("update", raw_args={"spec_hash": first.hex()[:62]}, error="InvalidOperation")
    sc.do("update", raw_args={"spec_hash": first.hex() + "00"}, error="InvalidOperation")
    sc.join(0, 1, 2, dt=1)
    sc.resume(dt=1)
    sc.do("update", spec_hash=second, error="UpdateNotHalted")
    sc.tick(dt=3, state=RunState.Warmup)
    sc.warmup_all(dt=1, state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    sc.do("update", spec_hash=second, error="UpdateNotHalted")
    sc.pause(dt=1)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    sc.do("update", dt=1, spec_hash=second,
          config=RunConfig(**{**BASE_CONFIG, "witness_nodes": 1}), error="PointsUnsettled")
    sc.check(sc.state.spec_hash == first)
    sc.settle_all(dt=1)
    sc.do("update", dt=1, spec_hash=second)
    sc.check(sc.state.spec_hash == second)
    sc.do("update", dt=1, spec_hash=bytes(32))  # back to no spec: clients simulate
    sc.check(sc.state.spec_hash == bytes(32))
    return sc


# ---------------------------------------------------------------- health checks

@scenario
def health_check_drop():
    sc = started("health_check_drop",
                 "A trainer of round 0 is missing from every participant bloom of round 1: in "
                 "round 2 a health check naming it drops it (and removes its join for the next "
                 "epoch); it no longer takes part.",
                 labels=(0, 1, 2, 3), config=dict(epoch_time=1000))
    sc.round(state=RunState.RoundTrain)           # round 0: blooms empty
    sc.join(3, dt=1)                              # 3 rejoins for the next epoch
    sc.round(missing=(3,), state=RunState.RoundTrain)  # round 1 vouches for 0, 1, 2 only
    sc.health_check(0, [3], dt=1)
    sc.check(sc.client_state(3) == ClientState.Dropped and not sc.state.pending)
    sc.witness(3, dt=1, error="NotAClient")
    sc.health_check(3, [0], error="NotAClient")
    sc.round(state=RunState.RoundTrain)
    sc.check(len(sc.state.current_round.participant_indices()) == 3)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def health_check_rejections():
    sc = started("health_check_rejections",
                 "Health checks too early (height < 2), naming a healthy client, mixing a healthy "
                 "and an unhealthy one (all rejected), an empty list, an index out of range, and "
                 "outside a round.",
                 labels=(0, 1, 2, 3), config=dict(epoch_time=1000))
    sc.health_check(0, [1], dt=1, error="InvalidHealthCheck")  # height 0
    sc.round(state=RunState.RoundTrain)
    sc.health_check(0, [1], dt=1, error="InvalidHealthCheck")  # height 1
    sc.round(missing=(2,), state=RunState.RoundTrain)
    sc.health_check(0, [1], dt=1, error="InvalidHealthCheck")
    sc.health_check(0, [2, 1], error="InvalidHealthCheck")
    sc.health_check(0, [], error="InvalidHealthCheck")
    sc.do("health_check", signer=signer(0), index=sc.idx(0), targets=[4],
          error="InvalidClientIndex")
    sc.do("health_check", signer=signer(0), index=sc.idx(0), targets=[2, 300],
          error="InvalidClientIndex")
    sc.do("health_check", signer=signer(0), index=9, targets=[2], error="InvalidClientIndex")
    sc.do("health_check", signer=signer(1), index=sc.idx(0), targets=[2], error="NotAClient")
    sc.health_check(0, [2, 2])  # accepted: duplicates name the same client
    sc.check(sc.client_state(2) == ClientState.Dropped)
    sc.health_check(0, [2])  # already dropped: still unhealthy, accepted, nothing changes
    sc.round(state=RunState.RoundTrain)
    sc.join(0, 1, dt=1)
    return sc


@scenario
def health_check_partial_bloom():
    sc = started("health_check_partial_bloom",
                 "Quorum of vouching: with 4 witnesses (quorum 2), a trainer missing from one "
                 "witness's bloom is still healthy (check rejected); missing from three it is "
                 "unhealthy and dropped.",
                 labels=(0, 1, 2, 3), config=dict(epoch_time=1000))
    sc.round(state=RunState.RoundTrain)
    w = sc.elected_labels()
    sc.check(len(w) == 4)
    sc.round(missing_for={w[0]: (1,)}, state=RunState.RoundTrain)
    sc.health_check(0, [1], dt=1, error="InvalidHealthCheck")
    w = sc.elected_labels()
    sc.round(missing_for={w[0]: (2,), w[1]: (2,), w[2]: (2,)}, state=RunState.RoundTrain)
    sc.health_check(0, [2], dt=1)
    sc.check(sc.client_state(2) == ClientState.Dropped)
    return sc


@scenario
def health_check_two_targets():
    sc = started("health_check_two_targets",
                 "Six clients; two trainers are missing from every bloom; one health check drops "
                 "both; in RoundWitness a health check is also allowed.",
                 labels=(0, 1, 2, 3, 4, 5), config=dict(epoch_time=1000))
    sc.round(state=RunState.RoundTrain)
    sc.round(missing=(4, 5), state=RunState.RoundTrain)
    sc.witness_all()
    sc.expect_state(RunState.RoundWitness)
    sc.health_check(1, [5, 4], dt=1)
    sc.check(sc.state.healthy_count() == 4)
    sc.finish_round(state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def health_check_dropped_rejoins():
    sc = started("health_check_dropped_rejoins",
                 "A dropped client joins again for the next epoch and trains in it; withdraw of a "
                 "dropped (not pending) client is InvalidWithdraw.",
                 labels=(0, 1, 2), config=dict(epoch_time=14))
    sc.round(state=RunState.RoundTrain)
    sc.round(missing=(1,), state=RunState.RoundTrain)
    sc.health_check(2, [1], dt=1)
    sc.withdraw(1, error="InvalidWithdraw")
    sc.rounds_until_cooldown()
    sc.join(0, 1, 2, dt=1)
    sc.end_cooldown()
    sc.start_epoch()
    sc.check(sc.client_state(1) == ClientState.Healthy)
    sc.warmup_all()
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def verification_percent():
    sc = started("verification_percent",
                 "verification_percent 25 with 8 clients: 2 verifiers per round get no batch; "
                 "blooms hold trainers only; naming a verifier of round 0 in a health check is "
                 "rejected (it had no batch); a trainer of round 0 missing from round 1's blooms "
                 "is dropped.",
                 labels=tuple(range(8)), config=dict(verification_percent=25, epoch_time=1000))
    sc.round(state=RunState.RoundTrain)
    r0 = sc.state.round_back(1)
    cm = RoundCommittee(r0, sc.state.config.witness_nodes, 25)
    sc.check(len(cm.verifier_indices()) == 2 and len(cm.trainers()) == 6)
    sc.check(sorted(assign_batches(sc.state.config, r0)) == sorted(cm.trainers()))
    verifier = sc.label_at(cm.verifier_indices()[0])
    trainer = sc.label_at(cm.trainers()[0])
    sc.round(missing=(trainer,), state=RunState.RoundTrain)
    reporter = next(label for label in range(8) if label not in (verifier, trainer))
    sc.health_check(reporter, [verifier], dt=1, error="InvalidHealthCheck")
    sc.health_check(reporter, [trainer])
    sc.check(sc.client_state(trainer) == ClientState.Dropped)
    sc.round(state=RunState.RoundTrain)
    return sc


# ---------------------------------------------------------------- batch sizes

@scenario
def batch_size_ramp():
    sc = started("batch_size_ramp",
                 "global_batch_size_warmup_tokens > 0: the batch grows from 4 to 16 sequences as "
                 "tokens (data_index * max_seq_len) approach 400; data_index carries across "
                 "epochs.",
                 labels=(0, 1, 2),
                 config=dict(global_batch_size_start=4, global_batch_size_end=16,
                             global_batch_size_warmup_tokens=400, max_seq_len=8, epoch_time=18))
    sc.rounds_until_cooldown()
    sc.join(0, 1, 2, dt=1)
    sc.end_cooldown()
    sc.check(0 < sc.state.epoch_start_data_index)
    sc.start_epoch()
    sc.warmup_all()
    for _ in range(4):
        sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def batch_smaller_than_clients():
    sc = started("batch_smaller_than_clients",
                 "Global batch 4 with 4 clients and verification 25: 3 trainers share 4 "
                 "sequences (2, 1, 1); with batch_end == clients nobody is idle.",
                 labels=(0, 1, 2, 3),
                 config=dict(global_batch_size_start=4, global_batch_size_end=4,
                             verification_percent=25))
    for _ in range(3):
        sc.round(state=RunState.RoundTrain)
    return sc


# ---------------------------------------------------------------- checkpoints

@scenario
def checkpoint_set_repo_dummy_to_p2p():
    sc = started("checkpoint_set_repo_dummy_to_p2p",
                 "A checkpointer records the Cooldown snapshot of the agreed parameters (repo, "
                 "revision, hash and step; kind stays Dummy): the Cooldown ends at once, Dummy -> "
                 "P2P; the same clients rejoin so P2P stays and the record is kept.",
                 labels=(0, 1, 2), config=dict(epoch_time=8))
    sc.rounds_until_cooldown()
    agreed = (sc.state.param_step, sc.state.param_hash)
    sc.check(agreed[1] == params(sc.run_id, agreed[0]) and agreed[0] == sc.state.step - 1)
    sc.checkpoint_op(1, "org/model", "main", dt=1, state=RunState.WaitingForMembers)
    sc.check(sc.state.checkpoint == Checkpoint(CheckpointKind.P2P, "org/model", "main",
                                               agreed[1], agreed[0]))
    sc.checkpoint_op(2, "org/model-2", dt=0)  # still the agreed pair: the last one wins
    sc.join(0, 1, 2, 9, dt=1)
    sc.start_epoch()
    sc.check(sc.state.checkpoint == Checkpoint(CheckpointKind.P2P, "org/model-2", "",
                                               agreed[1], agreed[0]))
    return sc


@scenario
def checkpoint_cooldown_early_end():
    sc = started("checkpoint_cooldown_early_end",
                 "Cooldown lasts cooldown_time (60 s) unless a snapshot of the epoch's final "
                 "parameters is recorded: the recorded checkpoint ends it 1 s in, and the next "
                 "epoch starts; an earlier snapshot point's record does not end a Cooldown.",
                 labels=(0, 1, 2), config=dict(epoch_time=8, cooldown_time=60,
                                                checkpoint_interval=2))
    sc.rounds_until_cooldown()
    sc.check(0 < sc.state.due_step < sc.state.param_step, "the snapshot point is not the latest")
    sc.checkpoint_op(0, "store/due", dt=1, step=sc.state.due_step,
                     param_hash=sc.state.due_hash, state=RunState.Cooldown)
    sc.tick(dt=1, state=RunState.Cooldown)
    sc.checkpoint_op(0, "store/final", dt=1, state=RunState.WaitingForMembers)
    sc.check(sc.state.epoch == 1 and sc.t - T0 < 60)
    sc.start_epoch(0, 1, 2)
    sc.warmup_all()
    return sc


@scenario
def checkpoint_hash_refused():
    sc = started("checkpoint_hash_refused",
                 "The coordinator records a snapshot only when its (step, parameter hash) is the "
                 "pair the witnesses agreed on: another hash, another step, a zero hash or a step "
                 "no quorum agreed on are refused with CheckpointHashMismatch, leaving the state "
                 "as it was; before any agreement nothing can be recorded.",
                 labels=(0, 1, 2), config=dict(epoch_time=8))
    sc.checkpoint_op(0, "store/x", dt=1, step=1, param_hash=params(sc.run_id, 1),
                     error="CheckpointHashMismatch")  # nothing agreed yet
    sc.round()
    sc.round()
    step, h = sc.state.param_step, sc.state.param_hash
    sc.checkpoint_op(0, "store/x", dt=1, param_hash=sha256("a forked model"),
                     error="CheckpointHashMismatch")
    sc.checkpoint_op(0, "store/x", step=step + 1, error="CheckpointHashMismatch")
    sc.checkpoint_op(0, "store/x", step=step - 1, param_hash=params(sc.run_id, step - 1),
                     error="CheckpointHashMismatch")  # agreed once, superseded, not a due point
    sc.checkpoint_op(0, "store/x", param_hash=bytes(32), step=0, error="CheckpointHashMismatch")
    sc.checkpoint_op(0, "store/x")
    sc.check(sc.state.checkpoint.hash == h and sc.state.checkpoint.step == step)
    return sc


@scenario
def param_hash_quorum():
    sc = started("param_hash_quorum",
                 "Witnesses commit the hash of the parameters they train with; the first time a "
                 "quorum of a round's witnesses commit one hash it becomes the agreed pair "
                 "(param_hash, param_step = the round's step). A minority hash changes nothing; "
                 "a round split without a quorum keeps the previous agreement; a zero hash never "
                 "counts. The witness whose hash differs from the agreed one goes back to "
                 "Syncing (it lags) and is no participant of the next round.",
                 labels=(0, 1, 2, 3), config=dict(epoch_time=60))
    sc.check(sc.state.param_step == 0 and sc.state.param_hash == bytes(32))
    w = sc.elected_labels()
    sc.check(len(w) == 4 and param_quorum(4) == 3)
    sc.witness(w[0], dt=1, param_hash=bytes(32))
    sc.witness(w[1], param_hash=bytes(32))
    sc.witness(w[2], param_hash=bytes(32))
    sc.check(sc.state.param_step == 0, "zero hashes agreed")
    sc.finish_round()
    step = sc.state.step
    odd = sha256("a diverged client")
    w = sc.elected_labels()
    sc.witness(w[0], dt=1, param_hash=odd)
    sc.witness(w[1])
    sc.witness(w[2])
    sc.check(sc.state.param_step == 0, "two of four is no quorum")
    sc.witness(w[3], state=RunState.RoundWitness)
    sc.check(sc.state.param_step == step and sc.state.param_hash == params(sc.run_id, step))
    lagging = w[0]
    sc.check(sc.state.clients[sc.idx(lagging)].phase == ClientPhase.Syncing)
    sc.finish_round()
    sc.check(sc.idx(lagging) not in sc.state.current_round.participant_indices())
    w = sc.elected_labels()
    sc.check(len(w) == 3 and param_quorum(3) == 2)
    sc.witness(w[0], dt=1, param_hash=odd)
    sc.witness(w[1], param_hash=sha256("another diverged client"))
    sc.witness(w[2])
    sc.check(sc.state.param_step == step, "a split round keeps the previous agreement")
    sc.finish_round()
    sc.round()
    sc.check(sc.state.param_step == sc.state.step - 1)
    return sc


@scenario
def checkpoint_recorded_mid_epoch():
    sc = started("checkpoint_recorded_mid_epoch",
                 "checkpoint_interval 3: the agreed hash of step 3 (then 6) is kept as the "
                 "snapshot point while later steps are agreed, so a checkpointer that uploads for "
                 "several rounds can still record it mid-epoch; the point moves on at step 6 and "
                 "the old one is refused.", labels=(0, 1, 2), config=dict(checkpoint_interval=3))
    while sc.state.param_step < 3:
        sc.round()
    sc.check(sc.state.due_step == 3 and sc.state.due_hash == params(sc.run_id, 3))
    sc.round()
    sc.round()
    sc.check(sc.state.param_step == 5 and sc.state.due_step == 3)
    sc.checkpoint_op(1, "store/step-3", dt=1, step=3, param_hash=params(sc.run_id, 3),
                     state=RunState.RoundTrain)
    sc.check(sc.state.checkpoint.step == 3 and sc.state.checkpoint.kind == CheckpointKind.Dummy)
    sc.round()
    sc.check(sc.state.due_step == 6)
    sc.checkpoint_op(2, "store/step-3", dt=1, step=3, param_hash=params(sc.run_id, 3),
                     error="CheckpointHashMismatch")
    sc.checkpoint_op(2, "store/step-6", step=6, param_hash=params(sc.run_id, 6))
    return sc


@scenario
def checkpoint_stored_after_pause():
    sc = started("checkpoint_stored_after_pause",
                 "Train, record the Cooldown snapshot, pause (every client withdrawn), resume: "
                 "whoever joins, the incumbents or new clients, the epoch announces the Stored "
                 "snapshot with its hash and step, not the run seed (Dummy).",
                 labels=(0, 1, 2), config=dict(epoch_time=8))
    sc.rounds_until_cooldown()
    sc.checkpoint_op(0, "store/final", dt=1, state=RunState.WaitingForMembers)
    recorded = sc.state.checkpoint
    sc.pause(dt=1, state=RunState.Paused)
    sc.check(sc.state.healthy_count() == 0)
    sc.resume(dt=1)
    sc.start_epoch(0, 1, 2)
    sc.check(sc.state.checkpoint == replace(recorded, kind=CheckpointKind.Stored))
    sc.warmup_all()
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.check(sc.state.checkpoint.kind == CheckpointKind.P2P)
    sc.start_epoch(30, 31, 32)
    sc.check(sc.state.checkpoint == replace(recorded, kind=CheckpointKind.Stored))
    return sc


@scenario
def layout_version_mismatch():
    sc = Scenario("layout_version_mismatch",
                  "An account of layout version 1 (before parameter hashes): every operation is "
                  "refused with LayoutVersionMismatch and the bytes stay as they were.",
                  layout_version=1)
    sc.resume(error="LayoutVersionMismatch")
    sc.tick(dt=1, error="LayoutVersionMismatch")
    sc.join(0, dt=1, error="LayoutVersionMismatch")
    sc.pause(error="LayoutVersionMismatch")
    sc.check(sc.state_hash_now() == sc.initial_hash)
    return sc


@scenario
def checkpoint_hub_to_p2p():
    sc = started("checkpoint_hub_to_p2p",
                 "The run starts from a Hub checkpoint; after the first epoch it is P2P.",
                 labels=(0, 1, 2), config=dict(epoch_time=8),
                 checkpoint=Checkpoint(CheckpointKind.Hub, "org/base", "v1"))
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.check(sc.state.checkpoint == Checkpoint(CheckpointKind.P2P, "org/base", "v1"))
    return sc


@scenario
def checkpoint_p2p_to_hub():
    sc = started("checkpoint_p2p_to_hub",
                 "A run from a Hub repository where no snapshot was recorded: after an epoch "
                 "(P2P) only new clients join, nobody holds the model, so the next epoch loads "
                 "from Hub.",
                 labels=(0, 1, 2), config=dict(epoch_time=8),
                 checkpoint=Checkpoint(CheckpointKind.Hub, "org/uploaded", "r7"))
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.check(sc.state.checkpoint.kind == CheckpointKind.P2P)
    sc.start_epoch(10, 11, 12)
    sc.check(sc.state.checkpoint == Checkpoint(CheckpointKind.Hub, "org/uploaded", "r7"))
    sc.warmup_all()
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.check(sc.state.checkpoint.kind == CheckpointKind.P2P)
    return sc


@scenario
def checkpoint_p2p_to_dummy():
    sc = started("checkpoint_p2p_to_dummy",
                 "Nobody uploaded a checkpoint (repo empty): the epoch end still makes it P2P "
                 "(with an empty repo); when only new clients join it falls back to Dummy.",
                 labels=(0, 1, 2), config=dict(epoch_time=8))
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.check(sc.state.checkpoint == Checkpoint(CheckpointKind.P2P, "", ""))
    sc.start_epoch(20, 21, 22)
    sc.check(sc.state.checkpoint == Checkpoint(CheckpointKind.Dummy, "", ""))
    return sc


@scenario
def checkpoint_initial_p2p():
    sc = Scenario("checkpoint_initial_p2p",
                  "A run created with a P2P checkpoint has no peers in its first epoch: P2P -> "
                  "Hub as the epoch starts.",
                  checkpoint=Checkpoint(CheckpointKind.P2P, "org/seed-model", ""))
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.check(sc.state.checkpoint.kind == CheckpointKind.Hub)
    return sc


@scenario
def checkpoint_elected_checkpointers():
    sc = started("checkpoint_elected_checkpointers",
                 "checkpointer_percent 25 with 4 clients: one elected checkpointer per round; the "
                 "others get NotACheckpointer; the elected one records the snapshot (which ends "
                 "the Cooldown).",
                 labels=(0, 1, 2, 3), config=dict(checkpointer_percent=25, epoch_time=8))
    sc.rounds_until_cooldown()
    cm = RoundCommittee(sc.state.current_round, 0, 0, 25)
    elected = [label for label in (0, 1, 2, 3) if cm.is_checkpointer(sc.idx(label))]
    sc.check(len(elected) == 1)
    for label in (0, 1, 2, 3):
        if label not in elected:
            sc.checkpoint_op(label, "org/x", dt=1, error="NotACheckpointer")
    sc.checkpoint_op(elected[0], "org/x", "abc", dt=1, state=RunState.WaitingForMembers)
    return sc


@scenario
def checkpoint_errors():
    sc = started("checkpoint_errors",
                 "Malformed checkpoint operations: empty repo, repo or revision over 64 bytes "
                 "(UTF-8 bytes, not characters), NUL inside; update with a bad checkpoint; a "
                 "withdrawn client's checkpoint; missing step or hash.",
                 labels=(0, 1, 2))
    sc.round()
    sc.checkpoint_op(0, "", dt=1, error="InvalidCheckpoint")
    sc.checkpoint_op(0, "r" * 65, error="InvalidCheckpoint")
    sc.checkpoint_op(0, "org/m", "v" * 65, error="InvalidCheckpoint")
    sc.checkpoint_op(0, "\u00e9" * 33, error="InvalidCheckpoint")  # 33 chars, 66 bytes
    sc.checkpoint_op(0, "org/\u0000model", error="InvalidCheckpoint")
    sc.checkpoint_op(0, "\u00e9" * 32, "r" * 64)  # exactly 64 bytes each: fine
    sc.checkpoint_op(0, "org/m", index=1, error="NotAClient")
    sc.checkpoint_op(0, "org/m", index=3, error="InvalidClientIndex")
    sc.do("checkpoint", signer=signer(0), index=sc.idx(0), repo=5, error="InvalidOperation")
    sc.do("checkpoint", raw_args={"signer": signer(0).hex(), "index": sc.idx(0), "repo": "a/b"},
          error="InvalidOperation")
    sc.do("checkpoint", raw_args={"signer": signer(0).hex(), "index": sc.idx(0), "repo": "a/b",
                                  "step": sc.state.param_step,
                                  "param_hash": sc.state.param_hash.hex()})
    sc.withdraw(1, dt=1)
    sc.checkpoint_op(1, "org/m", error="NotAClient")
    sc.pause(dt=1)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    sc.checkpoint_op(0, "org/m", error="Halted")
    sc.do("update", raw_args={"checkpoint": {"kind": "Hub", "repo": ""}}, error="InvalidCheckpoint")
    sc.do("update", raw_args={"checkpoint": {"kind": "P2P"}}, error="InvalidCheckpoint")
    sc.do("update", raw_args={"checkpoint": {"kind": "Gcs", "repo": "b"}},
          error="InvalidCheckpoint")
    sc.do("update", raw_args={"checkpoint": "Hub"}, error="InvalidOperation")
    sc.do("update", raw_args={"checkpoint": {"kind": "Hub", "repo": "a", "url": "b"}},
          error="InvalidOperation")
    sc.do("update", raw_args={"checkpoint": {"kind": ["Hub"], "repo": "a"}},
          error="InvalidCheckpoint")
    sc.do("update", raw_args={"checkpoint": {"kind": "Hub", "repo": 5}}, error="InvalidOperation")
    sc.do("update", raw_args={"checkpoint": {"kind": "Hub", "repo": "x" * 65}},
          error="InvalidCheckpoint")
    sc.do("update", raw_args={"checkpoint": {"kind": "Stored", "repo": "store/x"}},
          error="InvalidCheckpoint")  # a Stored checkpoint without its hash
    sc.do("update", raw_args={"checkpoint": {"kind": "Stored", "repo": "store/x",
                                             "hash": "ab" * 31}}, error="InvalidOperation")
    sc.do("update", raw_args={"checkpoint": {"kind": "Stored", "repo": "store/x",
                                             "hash": "ab" * 32, "step": 7}})
    sc.do("update", raw_args={"checkpoint": {"kind": "Dummy"}})
    sc.do("update", raw_args={"checkpoint": {"kind": "Dummy", "repo": "org/keep", "revision": "r"}})
    return sc


# ---------------------------------------------------------------- 256 clients

def big_run(name, description, witness_nodes, min_clients):
    labels = tuple(range(256))
    sc = Scenario(name, description,
                  config=dict(witness_nodes=witness_nodes, min_clients=min_clients,
                              init_min_clients=256, global_batch_size_start=512,
                              global_batch_size_end=512, epoch_time=1000))
    sc.resume()
    sc.start_epoch(*labels)
    sc.check(len(sc.state.clients) == 256)
    sc.warmup_all()  # 32 warmup witnesses suffice
    sc.check(len(sc.state.current_round.participant_indices()) == 256)
    return sc


@scenario
def clients_256_witness_nodes_0():
    sc = big_run("clients_256_witness_nodes_0",
                 "256 clients, witness_nodes 0 (all clients, capped at 32): 32 warmup witnesses "
                 "start training; each round 32 elected witnesses with full blooms; a trainer "
                 "missing from 12 of 32 blooms (quorum 21) is dropped by a health check.", 0, 2)
    sc.check(len(sc.elected()) == 32)
    sc.round(state=RunState.RoundTrain)
    w = sc.elected_labels()
    sc.round(missing_for={label: (200,) for label in w[:12]}, state=RunState.RoundTrain)
    sc.health_check(0, [200], dt=1)
    sc.check(sc.client_state(200) == ClientState.Dropped)
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def clients_256_witness_nodes_32():
    sc = big_run("clients_256_witness_nodes_32",
                 "256 clients, witness_nodes 32 (min_clients 32): 32 witnesses per round; a "
                 "non-elected client gets NotAWitness; 21 of 32 witnesses (the quorum) are "
                 "enough after max_round_train_time.", 32, 32)
    sc.round(state=RunState.RoundTrain)
    non = next(label for label in range(256) if sc.idx(label) not in sc.elected())
    sc.witness(non, dt=1, error="NotAWitness")
    sc.round(skip=tuple(sc.elected_labels()[21:]), state=RunState.RoundTrain)
    return sc


# ---------------------------------------------------------------- joining a live run (seed 002)

JOIN = dict(max_syncing=1, sync_warmup_rounds=2, epoch_time=1000)


@scenario
def join_mid_round_train():
    sc = started("join_mid_round_train",
                 "max_syncing > 0: a newcomer joining during RoundTrain enters this epoch at once "
                 "(Queued, then Syncing in the same operation since nobody else syncs); it is no "
                 "participant while it syncs. Its second join is for the next epoch (pending).",
                 labels=(0, 1, 2), config=JOIN)
    sc.round(state=RunState.RoundTrain)
    sc.join(10, dt=1)
    sc.check(len(sc.state.clients) == 4 and not sc.state.pending)
    sc.check(sc.phase(10) == ClientPhase.Syncing and sc.state.clients[sc.idx(10)].since
             == sc.state.step)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.participants() == {0, 1, 2})
    sc.join(10, dt=1)
    sc.check(sc.state.pending_index(signer(10)) == 0 and sc.phase(10) == ClientPhase.Syncing)
    sc.join(10, error="AlreadyJoined")
    return sc


@scenario
def join_mid_round_witness():
    sc = started("join_mid_round_witness",
                 "A newcomer joining during RoundWitness enters the epoch too (Syncing).",
                 labels=(0, 1, 2), config=JOIN)
    sc.witness_all()
    sc.expect_state(RunState.RoundWitness)
    sc.join(10, dt=1)
    sc.check(sc.phase(10) == ClientPhase.Syncing)
    sc.finish_round(state=RunState.RoundTrain)
    sc.check(10 not in sc.participants())
    return sc


@scenario
def join_in_warmup():
    sc = Scenario("join_in_warmup",
                  "A newcomer joining during Warmup enters the epoch Syncing: it sends no warmup "
                  "witness (WrongPhase), the others' warmup witnesses start the first round "
                  "without it, and "
                  "the warmup timeout does not drop it (only clients that train must be ready).",
                  config={**JOIN, "warmup_time": 10})
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.join(10, dt=1)
    sc.check(sc.phase(10) == ClientPhase.Syncing)
    sc.do("warmup_witness", signer=signer(10), index=sc.idx(10), error="WrongPhase")
    sc.warmup_all(state=RunState.RoundTrain)
    sc.check(sc.participants() == {0, 1, 2} and sc.client_state(10) == ClientState.Healthy)
    return sc


@scenario
def join_in_warmup_timeout():
    sc = Scenario("join_in_warmup_timeout",
                  "Warmup times out with a syncing newcomer and an unready client: the unready "
                  "one is dropped, the newcomer stays (Syncing).",
                  config={**JOIN, "warmup_time": 10, "init_min_clients": 3})
    sc.resume()
    sc.start_epoch(0, 1, 2)
    sc.join(10, dt=1)
    sc.do("warmup_witness", dt=1, signer=signer(0), index=sc.idx(0))
    sc.do("warmup_witness", signer=signer(1), index=sc.idx(1))
    sc.tick_timeout("warmup_time", state=RunState.RoundTrain)
    sc.check(sc.client_state(2) == ClientState.Dropped)
    sc.check(sc.client_state(10) == ClientState.Healthy and sc.phase(10) == ClientPhase.Syncing)
    sc.check(sc.participants() == {0, 1})
    return sc


@scenario
def join_outside_rounds_waits():
    sc = started("join_outside_rounds_waits",
                 "Joins in Cooldown and WaitingForMembers are for the next epoch (pending), as are "
                 "all joins when max_syncing is 0; at the next epoch they are Active clients.",
                 labels=(0, 1, 2), config={**JOIN, "epoch_time": 6})
    sc.rounds_until_cooldown()
    sc.join(10, dt=0)
    sc.check(sc.state.pending_index(signer(10)) is not None
             and sc.state.client_index(signer(10)) is None)
    sc.end_cooldown()
    sc.join(11, dt=0)
    sc.check(sc.state.client_index(signer(11)) is None)
    sc.start_epoch(0, 1, 2, 10, 11)
    sc.check(all(c.phase == ClientPhase.Active for c in sc.state.clients))
    sc.warmup_all()
    sc.check(sc.participants() == {0, 1, 2, 10, 11})
    return sc


@scenario
def join_capacity():
    sc = started("join_capacity",
                 "max_clients 4: a fourth client joins mid-epoch, a fifth is refused with RunFull "
                 "at once (no waiting list), in any phase; the epoch's clients joining for the "
                 "next epoch are not newcomers; a withdraw makes room.",
                 labels=(0, 1, 2), config={**JOIN, "max_clients": 4})
    sc.join(10, dt=1)
    sc.join(11, error="RunFull")
    sc.join(0, 1, 2, 10)
    sc.check(len(sc.state.pending) == 4 and sc.state.member_count() == 4)
    sc.witness_all()
    sc.join(11, error="RunFull")
    sc.withdraw(10, dt=1)
    sc.join(11)
    sc.check(sc.phase(11) == ClientPhase.Syncing)
    return sc


@scenario
def join_queue_fifo():
    sc = started("join_queue_fifo",
                 "max_syncing 1: of three newcomers the first syncs, the others queue in join "
                 "order; a slot frees when the syncing one turns Active (it still counts while "
                 "WarmingUp); the next in line syncs from the following round on.",
                 labels=(0, 1, 2), config=JOIN)
    sc.join(10, 11, dt=1)
    sc.round(state=RunState.RoundTrain)
    sc.join(12, dt=1)
    sc.check([sc.phase(n) for n in (10, 11, 12)]
             == [ClientPhase.Syncing, ClientPhase.Queued, ClientPhase.Queued])
    sc.synced(10, dt=1)
    sc.check(sc.phase(10) == ClientPhase.WarmingUp)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(11) == ClientPhase.Queued)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(11) == ClientPhase.Queued and sc.phase(10) == ClientPhase.WarmingUp)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(10) == ClientPhase.Active)
    sc.check(sc.phase(11) == ClientPhase.Syncing and sc.phase(12) == ClientPhase.Queued)
    return sc


@scenario
def join_queue_withdraw_frees_slot():
    sc = started("join_queue_withdraw_frees_slot",
                 "A syncing client that leaves frees its slot at the next round; a queued one "
                 "that leaves keeps nobody waiting; one that joins again goes to the queue's "
                 "tail, in its own slot.",
                 labels=(0, 1, 2), config=JOIN)
    sc.join(10, 11, 12, dt=1)
    sc.withdraw(11, dt=1)
    sc.withdraw(10)
    sc.check(sc.phase(12) == ClientPhase.Queued)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(12) == ClientPhase.Syncing)
    sc.join(10, 11, dt=1)
    sc.check(sc.idx(10) == 3 and sc.phase(10) == ClientPhase.Queued and len(sc.state.clients) == 6)
    sc.synced(12, dt=1)
    for _ in range(3):
        sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(10) == ClientPhase.Syncing and sc.phase(11) == ClientPhase.Queued)
    return sc


@scenario
def rejoin_same_round_cannot_witness():
    sc = started("rejoin_same_round_cannot_witness",
                 "A client that leaves and joins again within one round takes its old slot, whose "
                 "bit is still in the round's participants: it is Syncing and may not witness "
                 "(WrongPhase); the round ends on the others' witnesses, and it is no "
                 "participant of the next.",
                 labels=(0, 1, 2), config={**JOIN, "witness_nodes": 0})
    sc.round(state=RunState.RoundTrain)
    sc.withdraw(2, dt=1)
    sc.join(2)
    sc.check(sc.phase(2) == ClientPhase.Syncing and 2 in sc.participants())
    sc.witness(2, dt=1, error="WrongPhase")
    sc.witness(0)
    sc.witness(1)
    sc.finish_round(state=RunState.RoundTrain)
    sc.check(sc.participants() == {0, 1})
    return sc


@scenario
def rejoin_not_blamed_for_old_batches():
    sc = started("rejoin_not_blamed_for_old_batches",
                 "A client killed mid-round (its batch never delivered) that joins again at once "
                 "takes its old slot: a health check two rounds later about that batch names a "
                 "client that entered its phase after the round, so it is healthy "
                 "(InvalidHealthCheck; health_check_drop shows a client that stayed dropped).",
                 labels=(0, 1, 2, 3), config=JOIN)
    sc.round(state=RunState.RoundTrain)
    sc.withdraw(3, dt=1)  # killed: its batch of this round is never delivered
    sc.join(3)
    sc.check(sc.phase(3) == ClientPhase.Syncing)
    sc.round(state=RunState.RoundTrain)
    sc.round(missing=(3,), state=RunState.RoundTrain)
    sc.health_check(0, [3], dt=1, error="InvalidHealthCheck")
    sc.check(sc.client_state(3) == ClientState.Healthy)
    return sc


@scenario
def sync_phases_to_active():
    sc = started("sync_phases_to_active",
                 "Syncing -> WarmingUp (synced with the agreed pair) -> Active after "
                 "sync_warmup_rounds (2) rounds: the warming rounds list it as a participant "
                 "and in the round's `warming` mask (trained and witnessed, never applied); then "
                 "it is a plain participant.",
                 labels=(0, 1, 2), config=JOIN)
    sc.join(10, dt=1)
    sc.round(state=RunState.RoundTrain)
    w = sc.state.step
    sc.synced(10, dt=1)
    sc.check(sc.state.clients[sc.idx(10)].since == w)
    sc.check(10 not in sc.participants())
    sc.round(state=RunState.RoundTrain)
    sc.check(10 in sc.participants() and sc.warming() == {10})
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.warming() == {10} and sc.state.step == w + 2)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(10) == ClientPhase.Active and not sc.warming())
    sc.check(sc.participants() == {0, 1, 2, 10})
    sc.round(state=RunState.RoundTrain)
    return sc


@scenario
def sync_warmup_zero():
    sc = started("sync_warmup_zero",
                 "sync_warmup_rounds 0: a synced client is Active from the next round.",
                 labels=(0, 1, 2), config={**JOIN, "sync_warmup_rounds": 0})
    sc.join(10, dt=1)
    sc.round(state=RunState.RoundTrain)
    sc.synced(10, dt=1)
    sc.check(sc.phase(10) == ClientPhase.WarmingUp)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(10) == ClientPhase.Active and 10 in sc.participants() and not sc.warming())
    return sc


@scenario
def sync_hash_mismatch():
    sc = started("sync_hash_mismatch",
                 "synced is accepted only with the agreed (param_step, param_hash): another hash, "
                 "an older or a later step, or before any agreement is SyncHashMismatch; the "
                 "client stays Syncing.",
                 labels=(0, 1, 2), config=JOIN)
    sc.join(10, dt=1)
    sc.check(sc.state.param_hash == bytes(32))
    sc.synced(10, step=0, param_hash=bytes(32), error="SyncHashMismatch")
    sc.round(state=RunState.RoundTrain)
    step = sc.state.param_step
    sc.synced(10, dt=1, param_hash=sha256("a diverged replay"), error="SyncHashMismatch")
    sc.synced(10, step=step + 1, param_hash=params(sc.run_id, step + 1), error="SyncHashMismatch")
    sc.round(state=RunState.RoundTrain)
    sc.synced(10, dt=1, step=step, param_hash=params(sc.run_id, step), error="SyncHashMismatch")
    sc.check(sc.phase(10) == ClientPhase.Syncing)
    sc.synced(10)
    sc.check(sc.phase(10) == ClientPhase.WarmingUp)
    return sc


@scenario
def sync_wrong_phase():
    sc = started("sync_wrong_phase",
                 "WrongPhase: synced from a queued, an active or a warming client; resync from a "
                 "queued or a syncing one. synced outside RoundTrain/RoundWitness and resync "
                 "outside Warmup/RoundTrain/RoundWitness are InvalidRunState.",
                 labels=(0, 1, 2), config={**JOIN, "epoch_time": 8})
    sc.join(10, 11, dt=1)
    sc.round(state=RunState.RoundTrain)
    sc.synced(11, dt=1, error="WrongPhase")
    sc.synced(0, error="WrongPhase")
    sc.resync(11, error="WrongPhase")
    sc.resync(10, error="WrongPhase")
    sc.synced(10)
    sc.synced(10, error="WrongPhase")
    sc.rounds_until_cooldown()
    sc.synced(11, error="InvalidRunState")
    sc.resync(0, error="InvalidRunState")
    return sc


@scenario
def resync_lags_back():
    sc = started("resync_lags_back",
                 "An Active client that lags sends resync: Syncing at once, bypassing the queue "
                 "(max_syncing may be exceeded), no participant from the next round; it syncs, "
                 "warms up and is Active again. A WarmingUp client may resync too.",
                 labels=(0, 1, 2, 3), config=JOIN)
    sc.join(10, dt=1)
    sc.round(state=RunState.RoundTrain)
    sc.resync(1, dt=1)
    sc.check(sc.phase(1) == ClientPhase.Syncing and sc.state.syncing_count() == 2)
    sc.round(state=RunState.RoundTrain)
    sc.check(1 not in sc.participants())
    sc.synced(1, dt=1)
    sc.synced(10)
    sc.resync(10, dt=1)
    sc.check(sc.phase(10) == ClientPhase.Syncing)
    for _ in range(3):
        sc.round(state=RunState.RoundTrain)
    sc.check(sc.phase(1) == ClientPhase.Active and 1 in sc.participants())
    return sc


@scenario
def resync_below_min_clients():
    sc = started("resync_below_min_clients",
                 "Syncing clients do not train: when a resync leaves fewer than min_clients "
                 "training clients, the round ends the epoch (Cooldown).",
                 labels=(0, 1), config={**JOIN, "init_min_clients": 2})
    sc.round(state=RunState.RoundTrain)
    sc.resync(0, dt=1)
    sc.check(sc.state.training_count() == 1)
    sc.witness_all()
    sc.finish_round(state=RunState.Cooldown)
    return sc


@scenario
def lagging_witness_resyncs():
    sc = started("lagging_witness_resyncs",
                 "A WarmingUp witness that commits another hash than the one the quorum agrees "
                 "on goes back to Syncing; an agreement reached before a lagging witness sends "
                 "moves it as it sends.",
                 labels=(0, 1, 2, 3), config={**JOIN, "sync_warmup_rounds": 4})
    sc.join(10, dt=1)
    sc.round(state=RunState.RoundTrain)
    sc.synced(10, dt=1)
    sc.round(state=RunState.RoundTrain)
    sc.check(10 in sc.participants())
    odd = sha256("lagging")
    w = sc.elected_labels()
    sc.check(10 in w)
    first = True
    for label in [x for x in w if x != 10]:
        sc.witness(label, dt=1 if first else 0)
        first = False
    sc.check(sc.state.param_step == sc.state.step)
    sc.witness(10, param_hash=odd)
    sc.check(sc.phase(10) == ClientPhase.Syncing)
    sc.finish_round(state=RunState.RoundTrain)
    sc.check(10 not in sc.participants())
    return sc


@scenario
def joiner_next_epoch():
    sc = started("joiner_next_epoch",
                 "A mid-epoch joiner that joined the next epoch too starts it as an Active "
                 "client (it loads the model in Warmup like everyone); one that did not rejoin "
                 "is gone.",
                 labels=(0, 1, 2), config={**JOIN, "max_syncing": 2, "epoch_time": 8})
    sc.join(10, 11, dt=1)
    sc.join(10, dt=1)
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.start_epoch(0, 1, 2, 10)
    sc.check(sc.state.client_index(signer(11)) is None and sc.phase(10) == ClientPhase.Active)
    sc.warmup_all()
    sc.check(sc.participants() == {0, 1, 2, 10})
    return sc


@scenario
def rejoin_after_drop_mid_epoch():
    sc = started("rejoin_after_drop_mid_epoch",
                 "A client dropped by a health check may join again mid-epoch: it is Queued in "
                 "its own slot and syncs (it trained on parameters it no longer has a right to).",
                 labels=(0, 1, 2, 3), config={**JOIN, "epoch_time": 1000})
    sc.round(state=RunState.RoundTrain)
    sc.round(missing=(3,), state=RunState.RoundTrain)
    sc.health_check(0, [3], dt=1)
    sc.check(sc.client_state(3) == ClientState.Dropped)
    sc.join(3, dt=1)
    sc.check(sc.idx(3) == 3 and sc.client_state(3) == ClientState.Healthy
             and sc.phase(3) == ClientPhase.Syncing)
    return sc


# ---------------------------------------------------------------- rejected operations

@scenario
def errors_halted():
    sc = started("errors_halted",
                 "Halted: operations on a Paused run (tick, witness, warmup_witness, health "
                 "check, checkpoint, pause).", labels=(0, 1, 2))
    sc.pause(dt=1)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    sc.tick(dt=1, error="Halted")
    sc.witness(0, index=0, error="Halted")
    sc.do("warmup_witness", signer=signer(0), index=0, error="Halted")
    sc.do("health_check", signer=signer(0), index=0, targets=[1], error="Halted")
    sc.checkpoint_op(0, "a/b", error="Halted")
    sc.pause(error="Halted")
    sc.withdraw(0, error="InvalidWithdraw")  # withdraw_all already withdrew everyone
    return sc


@scenario
def errors_invalid_run_state():
    sc = Scenario("errors_invalid_run_state",
                  "InvalidRunState: witness outside a round or for the wrong step, warmup witness "
                  "outside Warmup, health check outside a round.", config=dict(epoch_time=8))
    sc.resume()
    sc.join(0, 1, 2, dt=1)
    sc.do("warmup_witness", signer=signer(0), index=0, error="InvalidRunState")
    sc.witness(0, index=0, error="InvalidRunState")
    sc.tick(dt=3, state=RunState.Warmup)
    sc.witness(0, dt=1, error="InvalidRunState")
    sc.health_check(0, [1], error="InvalidRunState")
    sc.warmup_all()
    sc.witness(sc.elected_labels()[0], step=sc.state.step + 1, dt=1, error="InvalidRunState")
    sc.witness(sc.elected_labels()[0], step=sc.state.step - 1, error="InvalidRunState")
    sc.witness(sc.elected_labels()[0], step=sc.state.step + 1000, error="InvalidRunState")
    sc.witness_all()
    sc.do("warmup_witness", signer=signer(0), index=sc.idx(0), error="InvalidRunState")
    sc.finish_round()
    sc.rounds_until_cooldown()
    sc.witness(0, dt=1, error="InvalidRunState")
    sc.do("warmup_witness", signer=signer(0), index=sc.idx(0), error="InvalidRunState")
    sc.health_check(0, [1], error="InvalidRunState")
    return sc


@scenario
def errors_not_a_client():
    sc = started("errors_not_a_client",
                 "NotAClient: signer not at the given index, a stranger, a pending (next-epoch) "
                 "client, a withdrawn client.", labels=(0, 1, 2, 3))
    w = sc.elected_labels()[0]
    other = next(label for label in (0, 1, 2, 3) if label != w)
    sc.witness(w, index=sc.idx(other), dt=1, error="NotAClient")
    sc.witness(99, index=sc.idx(w), error="NotAClient")
    sc.join(50, dt=1)
    sc.witness(50, index=0, error="NotAClient")
    sc.withdraw(w, dt=1)
    sc.witness(w, error="NotAClient")
    sc.do("warmup_witness", signer=signer(99), index=0, error="NotAClient")
    sc.do("health_check", signer=signer(99), index=1, targets=[0], error="NotAClient")
    return sc


@scenario
def errors_invalid_client_index():
    sc = started("errors_invalid_client_index",
                 "InvalidClientIndex: an index equal to the client count or far past it.",
                 labels=(0, 1, 2))
    sc.witness(0, index=3, dt=1, error="InvalidClientIndex")
    sc.witness(0, index=255, error="InvalidClientIndex")
    sc.witness(0, index=1000, error="InvalidClientIndex")
    sc.do("warmup_witness", signer=signer(0), index=3, error="InvalidClientIndex")
    sc.checkpoint_op(0, "a/b", index=7, error="InvalidClientIndex")
    return sc


@scenario
def errors_join():
    sc = Scenario("errors_join",
                  "AlreadyJoined (pending twice) and MoreClientsThanBatches (global_batch_size_end "
                  "4 limits joiners to 4); a client of the current epoch may join the next.",
                  config=dict(global_batch_size_start=4, global_batch_size_end=4,
                              init_min_clients=3))
    sc.join(0, 1, dt=1)
    sc.join(0, error="AlreadyJoined")
    sc.join(2, 3)
    sc.join(4, error="MoreClientsThanBatches")
    sc.join(3, error="AlreadyJoined")  # checked before the limit
    sc.withdraw(3, dt=1)
    sc.join(4)
    sc.resume(dt=1)
    sc.tick(dt=3, state=RunState.Warmup)
    sc.join(0, dt=1)
    sc.join(0, error="AlreadyJoined")
    return sc


@scenario
def errors_clients_full():
    sc = Scenario("errors_clients_full",
                  "Capacity at the account's limit (max_clients 256): 256 clients already wait "
                  "(global_batch_size_end 512), the 257th is refused with RunFull; after one "
                  "withdraws it gets in. Mid-epoch, the epoch's 256 client slots can be full of "
                  "entries while a member left: a newcomer is ClientsFull, the one who left "
                  "joins again in its own slot (at the queue's tail).",
                  config=dict(global_batch_size_start=512, global_batch_size_end=512,
                              max_syncing=1))
    sc.join(*range(256), dt=1)
    sc.join(256, dt=1, error="RunFull")
    sc.join(5, error="AlreadyJoined")
    sc.withdraw(17, dt=1)
    sc.join(256)
    sc.join(17, error="RunFull")
    for label in range(257):
        if label not in (0, 1, 2, 17):
            sc.withdraw(label)
    sc.resume(dt=1)
    sc.check(len(sc.state.pending) == 3)
    sc.start_epoch(0, 1, 2)
    sc.warmup_all()
    sc.join(*range(300, 553), dt=1)  # 253 newcomers mid-epoch: 256 client slots used
    sc.check(len(sc.state.clients) == 256 and sc.state.member_count() == 256)
    sc.join(553, error="RunFull")
    sc.withdraw(400, dt=1)
    sc.join(553, error="ClientsFull")
    sc.join(400)
    sc.check(sc.state.clients[sc.idx(400)].phase == ClientPhase.Queued)
    return sc


@scenario
def errors_witness():
    sc = started("errors_witness",
                 "NotAWitness (a participant not elected), DuplicateWitness, and a witness "
                 "arriving after it already witnessed opportunistically.",
                 labels=(0, 1, 2, 3, 4, 5), config=dict(witness_nodes=2))
    w = sc.elected_labels()
    non = [label for label in range(6) if label not in w]
    for label in non:
        sc.witness(label, dt=1, error="NotAWitness")
    sc.witness(w[0], dt=1)
    sc.witness(w[0], dt=1, error="DuplicateWitness")
    sc.witness(w[1], state=RunState.RoundWitness)
    sc.witness(w[1], dt=1, error="DuplicateWitness")
    sc.join(40, dt=1)
    sc.finish_round(state=RunState.RoundTrain)
    return sc


@scenario
def errors_malformed_bloom():
    sc = started("errors_malformed_bloom",
                 "MalformedBloom: participant or broadcast bloom of the wrong length (355, 357, "
                 "0 bytes) or with a bit set in any of the 3 padding bytes after the 353 bytes "
                 "of bits. A filter with every real bit set is accepted.", labels=(0, 1, 2))
    w = sc.elected_labels()
    good = bytes(BLOOM_BYTES)
    sc.witness(w[0], participant_bloom=good[:-1], dt=1, error="MalformedBloom")
    sc.witness(w[0], participant_bloom=good + b"\0", error="MalformedBloom")
    sc.witness(w[0], broadcast_bloom=b"", error="MalformedBloom")
    sc.witness(w[0], broadcast_bloom=good[:-1], error="MalformedBloom")
    for pos in (353, 354, 355):
        bad = bytearray(good)
        bad[pos] = 0x80 if pos == 355 else 0x01
        sc.witness(w[0], participant_bloom=bytes(bad), error="MalformedBloom")
        sc.witness(w[0], broadcast_bloom=bytes(bad), error="MalformedBloom")
    sc.witness(w[0], participant_bloom=bytes(352) + b"\x80" + bytes(3),
               broadcast_bloom=b"\xff" * 353 + bytes(3))
    sc.witness(w[1], merkle=bytes(31), error="InvalidOperation")
    sc.witness(w[1], merkle=bytes(33), error="InvalidOperation")
    return sc


@scenario
def errors_invalid_withdraw():
    sc = started("errors_invalid_withdraw",
                 "InvalidWithdraw: a stranger, a client that already withdrew (and is not "
                 "pending).", labels=(0, 1, 2))
    sc.withdraw(9, dt=1, error="InvalidWithdraw")
    sc.withdraw(1, dt=1)
    sc.withdraw(1, error="InvalidWithdraw")
    sc.join(1, dt=1)
    sc.withdraw(1)  # withdraws the next-epoch join
    sc.withdraw(1, error="InvalidWithdraw")
    return sc


@scenario
def errors_cannot_resume():
    sc = started("errors_cannot_resume",
                 "CannotResume in WaitingForMembers, Warmup, RoundTrain, RoundWitness, Cooldown.",
                 labels=(0, 1, 2), config=dict(epoch_time=8))
    sc.resume(error="CannotResume")
    sc.witness_all()
    sc.resume(error="CannotResume")
    sc.finish_round()
    sc.rounds_until_cooldown()
    sc.resume(error="CannotResume")
    sc.join(0, 1, 2, dt=1)
    sc.end_cooldown()
    sc.resume(error="CannotResume")
    sc.tick_timeout("waiting_for_members_extra_time", state=RunState.Warmup)
    sc.resume(error="CannotResume")
    return sc


@scenario
def errors_update():
    sc = Scenario("errors_update",
                  "UpdateNotHalted while running; InvalidConfig for bad configs (out-of-range, "
                  "cross-field, unknown field, wrong type) whatever the state; a partial config "
                  "object takes defaults for missing fields.")
    good = RunConfig(**BASE_CONFIG)
    sc.do("update", dt=1, config=RunConfig(**{**BASE_CONFIG, "epoch_time": 0}),
          error="InvalidConfig")
    sc.resume(dt=1)
    sc.do("update", dt=1, config=good, error="UpdateNotHalted")
    sc.do("update", raw_args={}, error="UpdateNotHalted")
    sc.do("update", config=RunConfig(**{**BASE_CONFIG, "min_clients": 0}), error="InvalidConfig")
    sc.pause(dt=1, state=RunState.Paused)
    bad = [
        {"epoch_time": 0}, {"warmup_time": 120}, {"cooldown_time": 0},
        {"max_round_train_time": 120}, {"round_witness_time": 0},
        {"global_batch_size_warmup_tokens": (1 << 44) + 1}, {"total_steps": 0},
        {"total_steps": (1 << 32) - 8}, {"max_seq_len": 0}, {"min_clients": 257},
        {"init_min_clients": 1}, {"witness_nodes": 3}, {"global_batch_size_start": 0},
        {"global_batch_size_end": 15}, {"global_batch_size_end": 65536},
        {"verification_percent": 51}, {"checkpointer_percent": 101},
        {"waiting_for_members_extra_time": 0}, {"waiting_for_members_extra_time": 256},
        {"epoch_time": (1 << 32) + 1}, {"warmup_time": -1},
        {"max_clients": 2}, {"max_clients": 257}, {"max_syncing": 257}, {"max_syncing": -1},
        {"kept_rounds": 4, "checkpoint_interval": 5}, {"kept_rounds": 65536},
        {"sync_warmup_rounds": 33}, {"evidence_quorum": 0}, {"evidence_quorum": 257},
        {"verify_sample": 256}, {"verify_sample": -1},
    ]
    for change in bad:
        sc.do("update", config=RunConfig(**{**BASE_CONFIG, **change}), error="InvalidConfig")
    sc.do("update", raw_args={"config": {**BASE_CONFIG, "rounds_per_epoch": 5}},
          error="InvalidConfig")
    sc.do("update", raw_args={"config": {**BASE_CONFIG, "epoch_time": "600"}},
          error="InvalidConfig")
    sc.do("update", raw_args={"config": {**BASE_CONFIG, "min_clients": True}},
          error="InvalidConfig")
    sc.do("update", raw_args={"config": {**BASE_CONFIG, "min_clients": 2.0}},
          error="InvalidConfig")
    sc.do("update", raw_args={"config": "fast"}, error="InvalidOperation")
    sc.do("update", raw_args={"config": {"epoch_time": 300, "total_steps": 50}}, dt=1)
    sc.check(sc.state.config == RunConfig(epoch_time=300, total_steps=50))
    sc.do("update", config=RunConfig(**{**BASE_CONFIG, "warmup_time": 119}), dt=1)
    return sc


@scenario
def errors_invalid_operation():
    sc = started("errors_invalid_operation",
                 "InvalidOperation from malformed JSON arguments: wrong types, uppercase or "
                 "non-hex bytes, wrong key lengths, missing or unknown arguments, an unknown "
                 "operation, args that are not an object.", labels=(0, 1, 2))
    w = sc.elected_labels()[0]
    pb, bb, mk = sc.blooms()
    base = {"signer": signer(w).hex(), "index": sc.idx(w), "step": sc.state.step,
            "participant_bloom": pb.hex(), "broadcast_bloom": bb.hex(),
            "broadcast_merkle": mk.hex(), "param_hash": params(sc.run_id, sc.state.step).hex()}
    bad = [
        {**base, "index": str(sc.idx(w))}, {**base, "index": True}, {**base, "step": 1.0},
        {**base, "step": None}, {**base, "signer": signer(w).hex().upper()},
        {**base, "signer": "zz" + signer(w).hex()[2:]}, {**base, "signer": signer(w).hex()[:-2]},
        {**base, "signer": signer(w).hex() + "00"}, {**base, "signer": 7},
        {**base, "participant_bloom": pb.hex()[:-1]},
        {k: v for k, v in base.items() if k != "broadcast_merkle"},
        {k: v for k, v in base.items() if k != "param_hash"}, {**base, "param_hash": "00" * 31},
        {**base, "extra": 1},
    ]
    for n, args in enumerate(bad):
        sc.do("witness", dt=1 if n == 0 else 0, raw_args=args, error="InvalidOperation")
    sc.do("join", raw_args={"signer": signer(9).hex()}, error="InvalidOperation")
    sc.do("join", raw_args={"signer": signer(9).hex(), "p2p_identity": p2p(9).hex()[:-2]},
          error="InvalidOperation")
    sc.do("join", raw_args={"signer": "", "p2p_identity": p2p(9).hex()}, error="InvalidOperation")
    sc.do("withdraw", raw_args={"signer": signer(0).hex(), "index": 0}, error="InvalidOperation")
    sc.do("tick", raw_args={"now": 5}, error="InvalidOperation")
    sc.do("health_check", raw_args={"signer": signer(0).hex(), "index": 0, "targets": 1},
          error="InvalidOperation")
    sc.do("health_check", raw_args={"signer": signer(0).hex(), "index": 0, "targets": ["1"]},
          error="InvalidOperation")
    sc.do("health_check", raw_args={"signer": signer(0).hex(), "index": 0, "targets": [True]},
          error="InvalidOperation")
    sc.do("frobnicate", raw_args={}, error="InvalidOperation")
    sc.do("join", raw_args={"signer": "ab " + "cd" * 31, "p2p_identity": "00" * 32},
          error="InvalidOperation")  # whitespace is not hex
    sc.do("tick", raw_args=[], error="InvalidOperation")
    sc.do("pause", raw_args=None, error="InvalidOperation")
    sc.do("witness", raw_args=base, state=RunState.RoundTrain)  # the well-formed one works
    return sc


@scenario
def checkpointer_election():
    sc = Scenario("checkpointer_election",
                  "With checkpointer_percent 50, checkpointers are elected from the current "
                  "round's participants: during Warmup no round exists yet, so every checkpoint "
                  "is NotACheckpointer; once training starts (and the witnesses agreed on the "
                  "parameters) the elected clients may checkpoint and the others may not.",
                  config=dict(checkpointer_percent=50))
    sc.resume()
    sc.start_epoch(0, 1, 2)
    for label in (0, 1, 2):
        sc.checkpoint_op(label, "org/a", dt=1, error="NotACheckpointer")
    sc.warmup_all()
    sc.round()
    cm = RoundCommittee(sc.state.current_round, 0, 0, 50)
    elected = [label for label in (0, 1, 2) if cm.is_checkpointer(sc.idx(label))]
    out = [label for label in (0, 1, 2) if not cm.is_checkpointer(sc.idx(label))]
    sc.check(len(out) == 1 and len(elected) == 2)
    sc.checkpoint_op(out[0], "org/d", dt=1, error="NotACheckpointer")
    sc.checkpoint_op(elected[0], "org/b")
    sc.check(sc.state.checkpoint.repo == "org/b")
    return sc


@scenario
def p2p_to_hub_after_pause():
    sc = started("p2p_to_hub_after_pause",
                 "A pause withdraws every client. When those same clients rejoin after resume, "
                 "none finished the last epoch healthy, so nobody is trusted to serve its model "
                 "and, no snapshot being recorded, the checkpoint falls back from P2P to Hub (the "
                 "run's repo).",
                 labels=(0, 1, 2), config=dict(epoch_time=8),
                 checkpoint=Checkpoint(CheckpointKind.Hub, "org/up", ""))
    sc.pause(dt=1)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    sc.check(all(c.state == ClientState.Withdrawn for c in sc.state.clients))
    sc.check(sc.state.checkpoint.kind == CheckpointKind.P2P)
    sc.resume(dt=1)
    sc.start_epoch(0, 1, 2)
    sc.check(sc.state.checkpoint.kind == CheckpointKind.Hub)
    sc.check(sc.state.checkpoint.repo == "org/up")
    return sc


@scenario
def withdraw_previous_epoch_client_waiting():
    sc = started("withdraw_previous_epoch_client_waiting",
                 "In WaitingForMembers the finished epoch's clients "
                 "are still listed as Healthy; one that did not rejoin can still withdraw (it is "
                 "marked Withdrawn), a second withdraw is InvalidWithdraw.",
                 labels=(0, 1, 2), config=dict(epoch_time=8))
    sc.rounds_until_cooldown()
    sc.end_cooldown()
    sc.withdraw(1, dt=1)
    sc.withdraw(1, error="InvalidWithdraw")
    sc.check(sc.client_state(1) == ClientState.Withdrawn)
    return sc


# ====================================================================== output

# ---------------------------------------------------------------- points

# 64-token sequences, 16 per round among 3 trainers: 5 or 6 each (320 or 384 tokens), so one
# compute point per 100 tokens leaves a carry; 3 presence points per round
POINTS = dict(max_seq_len=64, tokens_per_compute_point=100, presence_points=3,
              flops_per_token=6_600_000)


def _trained_sequences(sc) -> int:
    """Sequences of the training rounds of this epoch so far, from the rounds' own batches
    (every round's successor vouched for all of it in these scenarios)."""
    s, total = sc.state, 0
    for k in range(1, 4):
        r = s.round_back(k)
        if r is not None and s.round_trains(r):
            total += sum(len(b) for b in assign_batches(s.config, r).values())
    return total


@scenario
def points_presence_and_compute():
    sc = started("points_presence_and_compute",
                 "Every round credits presence to each healthy client and compute to the trainers "
                 "of the round before whose results a witness quorum vouched for; the slots hold "
                 "them until settled. The next epoch waits for its slots to be settled (a tick "
                 "with unsettled slots does nothing); settling credits each identity's entry at "
                 "the run's rates (3 points a round, a compute point per 100 tokens, the rest "
                 "carried) and a second settle finds NothingToSettle.",
                 labels=(0, 1, 2), config={**POINTS, "epoch_time": 8})
    sc.round(state=RunState.RoundTrain)
    sc.check(all(c.presence == 1 and c.sequences == 0 for c in sc.state.clients))
    sc.round(state=RunState.RoundTrain)
    sc.check(all(c.presence == 2 and c.sequences in (5, 6) for c in sc.state.clients))
    rounds = 2
    while sc.state.run_state != RunState.Cooldown:
        sc.round()
        rounds += 1
    sc.check(all(c.presence == rounds for c in sc.state.clients))
    trained = sum(1 for r in range(rounds) if sc.state.start_step + r < sc.state.last_step - 2)
    sc.check(sum(c.sequences for c in sc.state.clients) == 16 * trained)
    sc.join(0, 1, 2, dt=1)
    sc.end_cooldown()
    sc.tick(dt=5, state=RunState.WaitingForMembers)  # grace long over: the slots hold points
    before = [(c.presence, c.sequences) for c in sc.state.clients]
    sc.settle_all(dt=1)
    for label, (presence, sequences) in zip((0, 1, 2), before):
        e = sc.entry(label)
        sc.check(e.presence_rounds == presence and e.presence_points == 3 * presence)
        sc.check(e.sequences == sequences and e.tokens == 64 * sequences)
        sc.check(e.compute_points == e.tokens // 100 and e.token_carry == e.tokens % 100)
    sc.settle(0, error="NothingToSettle")
    sc.settle(3, error="InvalidClientIndex")
    sc.tick(dt=1, state=RunState.Warmup)
    sc.warmup_all()
    sc.round(state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    sc.settle(sc.idx(1), dt=1)  # mid-epoch: the carry from the first settlement counts
    e = sc.entry(1)
    sc.check(e.compute_points == e.tokens // 100 and e.presence_rounds == before[1][0] + 2)
    return sc


@scenario
def points_delegates():
    sc = Scenario("points_delegates",
                  "Two node keys (0 and 1) act for one contributor identity (label 50, a "
                  "delegation the backend checked); client 2 is its own identity. Each slot "
                  "earns on its own; settling both credits one entry with their sum.",
                  config={**POINTS, "epoch_time": 1000})
    sc.resume()
    sc.join(0, 1, identity=50, dt=1)
    sc.join(2)
    sc.check([c.identity for c in sc.state.pending] == [signer(50), signer(50), signer(2)])
    sc.start_epoch()
    sc.warmup_all()
    sc.check([c.identity for c in sc.state.clients] == [signer(50), signer(50), signer(2)])
    for _ in range(4):
        sc.round(state=RunState.RoundTrain)
    slots = [(c.presence, c.sequences) for c in sc.state.clients]
    sc.settle_all(dt=1)
    e = sc.entry(50)
    sc.check(e.presence_rounds == slots[0][0] + slots[1][0] == 8)
    sc.check(e.sequences == slots[0][1] + slots[1][1] and e.tokens == 64 * e.sequences)
    sc.check(sc.entry(0) is None and sc.entry(1) is None)
    sc.check(sc.entry(2).presence_rounds == 4 and sc.entry(2).sequences == slots[2][1])
    sc.do("join", signer=signer(3), p2p_identity=p2p(3), identity=b"\x01" * 31,
          error="InvalidOperation")
    return sc


@scenario
def points_cap():
    sc = started("points_cap",
                 "points_cap 14: presence points first, then compute points, stop at the cap "
                 "across settlements; the counts (rounds, sequences, tokens) keep growing.",
                 labels=(0, 1, 2), config={**POINTS, "epoch_time": 1000, "points_cap": 14})
    for _ in range(3):
        sc.round(state=RunState.RoundTrain)
    sc.settle(sc.idx(0), dt=1)
    e = sc.entry(0)
    sc.check(e.presence_points == 9 and e.tokens // 100 > 5 and e.compute_points == 5)
    sc.check(e.total == 14 and e.token_carry == e.tokens % 100)
    for _ in range(3):
        sc.round(state=RunState.RoundTrain)
    sc.settle(sc.idx(0), dt=1)
    e2 = sc.entry(0)
    sc.check(e2.total == 14 and e2.presence_rounds == 6 and e2.tokens > e.tokens)
    return sc


@scenario
def points_removed_client():
    sc = started("points_removed_client",
                 "A trainer left out of every bloom earns no compute for that batch and is "
                 "dropped by a health check; a withdrawn client too stops earning presence. The "
                 "batch each trained before it was removed, vouched for in the round after, "
                 "still counts. Both keep what they earned, settled mid-epoch (anyone may settle "
                 "any slot).",
                 labels=(0, 1, 2, 3), config={**POINTS, "epoch_time": 1000})
    sc.round(state=RunState.RoundTrain)                    # round 0
    sc.round(missing=(3,), state=RunState.RoundTrain)      # round 1 vouches for 0, 1, 2 only
    sc.check(sc.state.clients[sc.idx(3)].sequences == 0)
    sc.check(sc.state.clients[sc.idx(0)].sequences > 0)
    sc.health_check(0, [3], dt=1)
    sc.check(sc.client_state(3) == ClientState.Dropped)
    sc.withdraw(2, dt=1)
    held = {label: sc.state.clients[sc.idx(label)] for label in (2, 3)}
    sc.round(state=RunState.RoundTrain)  # vouches for round 1, which 2 trained before leaving
    sc.round(state=RunState.RoundTrain)
    c2, c3 = (sc.state.clients[sc.idx(label)] for label in (2, 3))
    sc.check(c2.presence == c3.presence == 2)
    sc.check(c2.sequences > held[2].sequences > 0 and c3.sequences > held[3].sequences == 0)
    held = {2: c2, 3: c3}
    sc.settle(sc.idx(3), dt=1)
    sc.settle(sc.idx(2))
    sc.check(sc.entry(3).presence_rounds == 2 and sc.entry(3).sequences == held[3].sequences)
    sc.check(sc.entry(2).sequences == held[2].sequences)
    sc.settle(sc.idx(3), error="NothingToSettle")
    return sc


@scenario
def points_join_phases():
    sc = started("points_join_phases",
                 "Seed 002's points by phase: a joiner earns presence from its first round, "
                 "Queued and Syncing included, and compute only once it trains (WarmingUp rounds "
                 "included, though their results are never applied).",
                 labels=(0, 1, 2), config={**JOIN, **POINTS})
    sc.join(10, 11, dt=1)
    sc.check(sc.phase(10) == ClientPhase.Syncing and sc.phase(11) == ClientPhase.Queued)
    sc.round(state=RunState.RoundTrain)
    c10, c11 = (sc.state.clients[sc.idx(label)] for label in (10, 11))
    sc.check(c10.presence == 1 and c11.presence == 1 and c10.sequences == c11.sequences == 0)
    sc.synced(10, dt=1)
    sc.round(state=RunState.RoundTrain)                    # synced: no batch yet
    sc.check(10 in sc.warming() and sc.state.clients[sc.idx(10)].sequences == 0)
    sc.round(state=RunState.RoundTrain)                    # its first warming batch
    sc.check(sc.state.clients[sc.idx(10)].sequences == 0)
    sc.round(state=RunState.RoundTrain)                    # vouches for the warming batch
    sc.check((sc.state.round_back(2).warming >> sc.idx(10)) & 1 == 1)  # the vouched round warmed
    sc.check(sc.state.clients[sc.idx(10)].sequences > 0)
    sc.check(sc.state.clients[sc.idx(11)].presence == 4)
    sc.check(sc.state.clients[sc.idx(11)].sequences == 0)
    sc.settle_all(dt=1)
    sc.check(sc.entry(10).sequences > 0 and sc.entry(11).presence_rounds == 4)
    return sc


@scenario
def points_rejoin_identity():
    sc = started("points_rejoin_identity",
                 "A client that left and joins again mid-epoch keeps its slot and the points in "
                 "it when it acts for the same identity; as another identity it must settle them "
                 "first (PointsUnsettled), and what it earns next goes to the new identity.",
                 labels=(0, 1, 2), config={**JOIN, **POINTS})
    sc.round(state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    sc.withdraw(2, dt=1)
    held = sc.state.clients[sc.idx(2)]
    sc.join(2, dt=1)                                       # the same identity: points kept
    c = sc.state.clients[sc.idx(2)]
    sc.check(c.phase == ClientPhase.Syncing and (c.presence, c.sequences)
             == (held.presence, held.sequences))
    sc.withdraw(2, dt=1)
    sc.join(2, identity=60, error="PointsUnsettled")
    sc.settle(sc.idx(2))
    sc.join(2, identity=60)
    sc.check(sc.state.clients[sc.idx(2)].identity == signer(60))
    sc.round(state=RunState.RoundTrain)
    sc.settle(sc.idx(2), dt=1)
    sc.check(sc.entry(2).presence_rounds == held.presence)
    sc.check(sc.entry(60).presence_rounds == 1)
    return sc


@scenario
def points_settle_when_halted():
    sc = started("points_settle_when_halted",
                 "Settling works in every run state: after a pause (Paused) and after the run "
                 "ends (Finished). A config change waits until every slot is settled.",
                 labels=(0, 1, 2), config={**POINTS, "epoch_time": 1000, "total_steps": 4})
    sc.round(state=RunState.RoundTrain)
    sc.pause(dt=1)
    sc.round(state=RunState.Cooldown)
    sc.end_cooldown(state=RunState.Paused)
    cfg = RunConfig(**{**BASE_CONFIG, **POINTS, "presence_points": 5, "total_steps": 4})
    sc.do("update", dt=1, config=cfg, error="PointsUnsettled")
    sc.settle(0, dt=1)
    sc.do("update", dt=1, config=cfg, error="PointsUnsettled")
    sc.settle(1)
    sc.settle(2)
    sc.do("update", dt=1, config=cfg)
    sc.resume(dt=1)
    sc.start_epoch(0, 1, 2)
    sc.warmup_all()
    while sc.state.run_state != RunState.Cooldown:
        sc.round()
    sc.end_cooldown(state=RunState.Finished)
    sc.settle_all(dt=1)
    sc.check(sc.entry(0).presence_points == 3 * 2 + 5 * (sc.entry(0).presence_rounds - 2))
    return sc


# ---------------------------------------------------------------- evidence

# 8 clients, a quarter of each round's participants elected to verify: 2 verifiers, 6 trainers
EVIDENCE = dict(verification_percent=25, epoch_time=1000, min_clients=2, init_min_clients=3,
                max_seq_len=64)
EIGHT = tuple(range(8))


@scenario
def evidence_below_quorum():
    sc = started("evidence_below_quorum",
                 "An elected verifier of the current round sends evidence against a trainer's "
                 "result: its bit is set in the trainer's accusers, the trainer stays Healthy "
                 "(evidence_quorum 2), and the round's accused mask has it. In the next round a "
                 "verifier of the previous step accuses another trainer for that step: the "
                 "previous round's mask has it, the current round's does not. The accusers stay "
                 "through the round's end.",
                 labels=EIGHT, config=EVIDENCE)
    v, trainers = sc.verifiers(), sc.trainers()
    sc.check(len(v) == 2 and len(trainers) == 6 and not set(v) & set(trainers))
    target = sc.sample(v[0])[0]
    sc.evidence(v[0], target, dt=1)
    sc.check(sc.accusers(target) == {v[0]} and sc.accused() == {target})
    sc.check(sc.client_state(target) == ClientState.Healthy)
    step = sc.state.step
    sc.round(state=RunState.RoundTrain)
    v0 = sc.verifiers(step)
    other = sc.sample(v0[1], step)[0]
    sc.evidence(v0[1], other, step=step, dt=1)
    sc.check(sc.accusers(other) >= {v0[1]})
    sc.check(sc.accused(step) == {target, other} and not sc.accused())
    sc.check(sc.client_state(other) == ClientState.Healthy)
    sc.round(state=RunState.RoundTrain)
    sc.check(sc.accusers(target) == {v[0]})
    return sc


@scenario
def evidence_redundant_samples():
    sc = started("evidence_redundant_samples",
                 "With verify_sample 6, each of a round's 2 verifiers judges all 6 trainers' "
                 "results (the samples lie end to end around the verification order, so they "
                 "overlap when they add up to more than the trainers). Both accuse one trainer "
                 "in the same round: evidence_quorum 2 evicts it there. A verifier may name any "
                 "trainer; a verifier is still no target (InvalidEvidence).",
                 labels=EIGHT, config={**EVIDENCE, "verify_sample": 6})
    v = sc.verifiers()
    first, second = sc.sample(v[0]), sc.sample(v[1])
    sc.check(len(v) == 2 and len(first) == 6 and set(first) == set(second),
             "both verifiers judge every trainer")
    target = first[-1]
    sc.evidence(v[0], v[1], dt=1, error="InvalidEvidence")
    sc.evidence(v[0], target)
    sc.check(sc.client_state(target) == ClientState.Healthy)
    sc.evidence(v[1], target, dt=1)
    sc.check(sc.client_state(target) == ClientState.Evicted)
    sc.check(sc.accusers(target) == {v[0], v[1]} and sc.accused() == {target})
    sc.evidence(v[1], first[0])
    sc.check(sc.accused() == {target, first[0]})
    return sc


@scenario
def evidence_quorum_evicts():
    sc = started("evidence_quorum_evicts",
                 "Two elected verifiers accuse one trainer that has joined for the next epoch "
                 "too, each in a round whose sample gives it that trainer (the samples of one "
                 "round do not overlap): at the second evidence (evidence_quorum 2) it is "
                 "Evicted, its unsettled presence and sequences are forfeited (zero) and its "
                 "pending join is removed. The batch it was accused over earns it nothing at the "
                 "round's end; further evidence against it is InvalidEvidence.",
                 labels=EIGHT, config={**EVIDENCE, **POINTS, "epoch_time": 1000})
    sc.round(state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    step = sc.state.step
    sc.round(state=RunState.RoundTrain)
    first = sc.verifiers(step)[0]
    target = next(x for x in sc.sample(first, step) if sc.state.clients[sc.idx(x)].sequences)
    sc.join(target, dt=1)  # a client of this epoch joins for the next
    sc.check(sc.state.pending_index(signer(target)) is not None)
    c = sc.state.clients[sc.idx(target)]
    sc.check(c.presence == 3 and c.sequences > 0)
    sc.evidence(first, target, step=step, dt=1)
    sc.check(sc.client_state(target) == ClientState.Healthy)
    for _ in range(20):  # a round where another verifier's sample has the target
        second = [x for x in sc.verifiers() if x != first and target in sc.sample(x)]
        if second:
            break
        sc.round(state=RunState.RoundTrain)
    sc.check(bool(second), "no round gave the target to another verifier")
    step = sc.state.step
    healthy = sc.state.healthy_count()
    sc.evidence(second[0], target, dt=1)
    c = sc.state.clients[sc.idx(target)]
    sc.check(c.state == ClientState.Evicted and c.presence == 0 and c.sequences == 0)
    sc.check(sc.accusers(target) == {first, second[0]})
    sc.check(sc.state.pending_index(signer(target)) is None and not sc.state.pending)
    sc.check(sc.state.healthy_count() == healthy - 1)
    sc.evidence(second[0], target, step=step, error="InvalidEvidence")
    sc.round(state=RunState.RoundTrain)
    c = sc.state.clients[sc.idx(target)]
    sc.check(c.state == ClientState.Evicted and c.presence == 0 and c.sequences == 0)
    sc.settle(sc.idx(target), dt=1, error="NothingToSettle")
    return sc


@scenario
def evidence_not_a_verifier():
    sc = started("evidence_not_a_verifier",
                 "Evidence from a trainer of the round, or from a verifier of the current round "
                 "for the previous step it was not elected to verify, is NotAVerifier; a signer "
                 "that is not the client at the index is NotAClient, a bad sender index "
                 "InvalidClientIndex.",
                 labels=EIGHT, config=EVIDENCE)
    trainers = sc.trainers()
    sc.evidence(trainers[0], trainers[1], dt=1, error="NotAVerifier")
    step = sc.state.step
    sc.round(state=RunState.RoundTrain)
    for _ in range(8):
        stale = [x for x in sc.verifiers() if x not in sc.verifiers(step)]
        if stale:
            break
        step = sc.state.step
        sc.round(state=RunState.RoundTrain)
    sc.check(bool(stale), "no round elected a verifier that was not one the round before")
    sc.evidence(stale[0], sc.trainers(step)[0], step=step, dt=1, error="NotAVerifier")
    sc.evidence(stale[0], sc.sample(stale[0])[0])  # of the current step it is a verifier
    v = sc.verifiers()
    sc.evidence(v[1], sc.trainers()[0], index=sc.idx(trainers[2]), error="NotAClient")
    sc.evidence(v[1], sc.trainers()[0], index=8, error="InvalidClientIndex")
    return sc


@scenario
def evidence_wrong_step():
    sc = started("evidence_wrong_step",
                 "Evidence is for the current step or the one before, in a round of this epoch "
                 "that trains: a later step, an older one, the previous step in the epoch's "
                 "first round, and a drain round's step are InvalidEvidence; a malformed step "
                 "or target is InvalidOperation.",
                 labels=EIGHT, config={**EVIDENCE, "epoch_time": 24})
    v, trainers = sc.verifiers(), sc.trainers()
    s = sc.state.step
    sc.evidence(v[0], trainers[0], step=s - 1, dt=1, error="InvalidEvidence")  # no round yet
    sc.evidence(v[0], trainers[0], step=s + 1, error="InvalidEvidence")
    sc.round(state=RunState.RoundTrain)
    sc.round(state=RunState.RoundTrain)
    v, trainers = sc.verifiers(), sc.trainers()
    sc.evidence(v[0], trainers[0], step=sc.state.step - 2, dt=1, error="InvalidEvidence")
    sc.evidence(v[0], trainers[0], step=0, error="InvalidEvidence")
    args = dict(signer=signer(v[0]).hex(), index=sc.idx(v[0]), step=sc.state.step,
                target=sc.idx(trainers[0]))
    sc.do("evidence", raw_args={**args, "step": -1}, error="InvalidOperation")
    sc.do("evidence", raw_args={**args, "target": "1"}, error="InvalidOperation")
    sc.do("evidence", raw_args={**args, "target": 65536}, error="InvalidOperation")
    sc.do("evidence", raw_args={k: a for k, a in args.items() if k != "target"},
          error="InvalidOperation")
    for _ in range(20):
        st = sc.state
        if st.run_state == RunState.RoundTrain and not st.round_trains(st.current_round):
            break
        sc.round()
    st = sc.state
    sc.check(st.run_state == RunState.RoundTrain and not st.round_trains(st.current_round),
             "no drain round")
    any_client = sc.label_at(next(i for i, c in enumerate(st.clients) if c.trains))
    sc.evidence(any_client, any_client, dt=1, error="InvalidEvidence")
    return sc


@scenario
def evidence_target_not_trained():
    sc = started("evidence_target_not_trained",
                 "The target must have had a batch in that round, be in the verifier's sample "
                 "and be Healthy: a verifier (no batch), a trainer of another verifier's sample "
                 "or a withdrawn trainer is InvalidEvidence; a target index past the clients is "
                 "InvalidClientIndex.",
                 labels=EIGHT, config=EVIDENCE)
    v = sc.verifiers()
    mine, theirs = sc.sample(v[0]), sc.sample(v[1])
    sc.check(len(mine) == 3 and len(theirs) == 3 and not set(mine) & set(theirs))
    sc.evidence(v[0], v[1], dt=1, error="InvalidEvidence")
    sc.evidence(v[0], theirs[0], error="InvalidEvidence")
    sc.evidence(v[0], ("index", 8), error="InvalidClientIndex")
    sc.evidence(v[0], ("index", 65535), error="InvalidClientIndex")
    sc.withdraw(mine[0], dt=1)
    sc.evidence(v[0], mine[0], error="InvalidEvidence")
    sc.evidence(v[0], mine[1])
    sc.check(sc.accused() == {mine[1]})
    return sc


@scenario
def evidence_already_accused():
    sc = started("evidence_already_accused",
                 "A verifier accuses a trainer's result of a round once: its second evidence "
                 "against it (for the same step, or in the next round for the one before) is "
                 "AlreadyAccused. Another trainer of its sample it may still accuse. In a later "
                 "round that gives it the same trainer again it may accuse that round's result: "
                 "the round's accused mask has it, the accusers (counted once per verifier) stay.",
                 labels=EIGHT, config={**EVIDENCE, "evidence_quorum": 3})
    v = sc.verifiers()
    first, second = sc.sample(v[0])[:2]
    sc.evidence(v[0], first, dt=1)
    sc.evidence(v[0], first, error="AlreadyAccused")
    step = sc.state.step
    sc.round(state=RunState.RoundTrain)
    sc.evidence(v[0], first, step=step, dt=1, error="AlreadyAccused")
    sc.evidence(v[0], second, step=step)
    sc.check(sc.accusers(first) == {v[0]} and sc.accused(step) == {first, second})
    for _ in range(80):  # a round that elects v[0] again and gives it `first`
        if v[0] in sc.verifiers() and first in sc.sample(v[0]):
            break
        sc.round(state=RunState.RoundTrain)
    sc.check(v[0] in sc.verifiers() and first in sc.sample(v[0]),
             "no later round gave the verifier the same trainer")
    sc.evidence(v[0], first, dt=1)
    sc.check(sc.accusers(first) == {v[0]} and sc.accused() == {first})
    sc.check(sc.client_state(first) == ClientState.Healthy)
    return sc


@scenario
def evidence_evicted_rejoin_refused():
    sc = started("evidence_evicted_rejoin_refused",
                 "With evidence_quorum 1 one verifier evicts a trainer. Its joins are refused "
                 "(Evicted) for the rest of the epoch, mid-epoch and for the next epoch, through "
                 "Cooldown and WaitingForMembers; its other operations are NotAClient. Once the "
                 "next epoch has rebuilt the client list it may join again (mid-epoch, Queued).",
                 labels=EIGHT, config={**EVIDENCE, "evidence_quorum": 1, "max_syncing": 1,
                                       "epoch_time": 20})
    v = sc.verifiers()
    target = sc.sample(v[1])[0]
    sc.evidence(v[1], target, dt=1)
    sc.check(sc.client_state(target) == ClientState.Evicted)
    sc.join(target, dt=1, error="Evicted")
    sc.do("warmup_witness", signer=signer(target), index=sc.idx(target), error="NotAClient")
    sc.withdraw(target, error="InvalidWithdraw")
    sc.rounds_until_cooldown()
    sc.join(target, dt=1, error="Evicted")
    others = [label for label in EIGHT if label != target]
    sc.join(*others)
    sc.end_cooldown()
    sc.join(target, dt=1, error="Evicted")
    sc.start_epoch()
    sc.check(sc.state.client_index(signer(target)) is None)
    sc.warmup_all()
    sc.join(target, dt=1)
    sc.check(sc.phase(target) in (ClientPhase.Queued, ClientPhase.Syncing))
    sc.check(sc.client_state(target) == ClientState.Healthy and not sc.accusers(target))
    return sc


@scenario
def evidence_in_cooldown():
    sc = started("evidence_in_cooldown",
                 "Evidence belongs to a round: InvalidRunState in Warmup, Cooldown and "
                 "WaitingForMembers, Halted when paused; RoundWitness takes it.",
                 labels=EIGHT, config={**EVIDENCE, "epoch_time": 12})
    v, trainers = sc.verifiers(), sc.trainers()
    sc.witness_all()
    sc.expect_state(RunState.RoundWitness)
    target = sc.sample(v[0])[0]
    sc.evidence(v[0], target, dt=1, state=RunState.RoundWitness)
    step, label = sc.state.step, v[0]
    sc.finish_round()
    sc.rounds_until_cooldown()
    sc.do("evidence", dt=1, error="InvalidRunState", signer=signer(label), index=sc.idx(label),
          step=step, target=sc.idx(target))
    sc.do("evidence", error="InvalidRunState", signer=signer(label), index=sc.idx(label),
          step=sc.state.step, target=sc.idx(trainers[1]))
    sc.join(*EIGHT, dt=1)
    sc.end_cooldown()
    sc.do("evidence", dt=1, error="InvalidRunState", signer=signer(label), index=sc.idx(label),
          step=sc.state.step, target=sc.idx(trainers[1]))
    sc.start_epoch()
    sc.do("evidence", dt=1, error="InvalidRunState", signer=signer(label), index=sc.idx(label),
          step=sc.state.step, target=sc.idx(trainers[1]))
    sc.pause(dt=1, state=RunState.Paused)
    sc.do("evidence", dt=1, error="Halted", signer=signer(label), index=0,
          step=sc.state.step, target=1)
    return sc


def render(doc: dict) -> str:
    """Stable text: top-level keys one per line, each step on its own line."""
    head = {k: v for k, v in doc.items() if k != "steps"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f" {json.dumps(k)}: {json.dumps(v, sort_keys=False)},")
    lines.append(' "steps": [')
    steps = [" " * 2 + json.dumps(s, sort_keys=False) for s in doc["steps"]]
    lines.append(",\n".join(steps))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def build_all() -> dict:
    """{file name: text} of every scenario."""
    out = {}
    for fn in SCENARIOS:
        sc = fn()
        if sc.name != fn.__name__:
            raise ScenarioError(f"{fn.__name__} builds a scenario named {sc.name}")
        out[f"{sc.name}.json"] = render(sc.to_json())
    return out


def write_all(out_dir, prune=False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = build_all()
    for name, text in files.items():
        (out_dir / name).write_text(text, encoding="utf-8", newline="\n")
    if prune:
        for p in out_dir.glob("*.json"):
            if p.name not in files:
                p.unlink()
    return files


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory to write to (default: next to this script, "
                    "removing stale vectors there)")
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parent
    out = Path(args.out) if args.out else here
    files = write_all(out, prune=args.out is None or out.resolve() == here)
    size = sum(len(t.encode()) for t in files.values())
    steps = sum(t.count('"expect"') for t in files.values())
    print(f"wrote {len(files)} vectors, {steps} steps, {size / 1e6:.2f} MB to {out}")


if __name__ == "__main__":
    main()
