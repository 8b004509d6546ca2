"""Real training for the client daemon: a seeded Llama, DisTrO, data from the run's provider.

The daemon calls these from one worker thread, in the order the state machine asked for them:
  prepare(epoch, state, fetch)     have the epoch's starting model: the one held, the recorded
                                   snapshot (Stored), the run seed's, or the peers' snapshot
                                   (P2P checkpoint); log held-out loss; return its hash
  apply(step, results)             apply the consensus results of a round (everyone the same set)
  train(step, batch, state) ->     train on the batch, return the compressed update as a payload
  evaluate(epoch, step)            held-out loss, once per epoch
  snapshot(step, encode)           the epoch is applied: note it, and encode the model to share
  capture()                        the model in Hugging Face layout, for the snapshot store
so a round's apply always comes before the next training that must see it.

With data_parallelism N > 1 the trainer is rank 0 of a DataParallelGroup (parallel.py): the
batch's forward/backward is split over N replicas, everything else stays here; close() stops it.

Progress lines (the model, each step's loss, each apply, held-out loss) go to this module's
logger at INFO (the client's command line prints them with its prefix), or to a `log` callback
when one is given (tests read the lines)."""

import json
import logging
import math
import time

import numpy as np
import torch

from psyche_coordinator_core import CheckpointKind

from ..data.http import HttpDataProvider
from ..data.local import LocalDataProvider
from ..data.manifest import ManifestError, load_manifest
from ..data.tcp import TcpDataProvider
from .distro import DistroOptimizer, update_signs
from .errors import ModelUnavailable
from .heldout import heldout_loss
from .judge import (
    OVERLAP_MIN,
    SIGN_Z_MIN,
    STEP_MIN,
    is_bad,
    overlap,
    sign_score,
    step_gain,
    votes,
)
from .model import (
    build_model,
    load_model_code,
    parameter_count,
    parameter_hash,
    parameter_shapes,
)
from .parallel import DataParallelGroup, forward_backward
from .payload import encode_payload, peer_result_from_training_result
from .snapshot import SnapshotError, encode_snapshot, layout_of, load_snapshot, size_limit
from .stored import hf_files, load_stored
from .validation import check_payload, fingerprint, result_layout

logger = logging.getLogger(__name__)


def data_pinning(spec, warn=True) -> dict:
    """The providers' `manifest` and `manifest_location` arguments for the run's token files:
    its data manifest, loaded and checked against the spec's hash ({} for a run that names
    none, with a warning unless `warn` is off, and for data that is not token files)."""
    d = spec.data
    if d.kind not in ("local", "http"):
        return {}
    if not d.manifest:
        if warn:
            logger.warning("the run names no data manifest: nothing checks that this client "
                           "reads the same tokens as the others")
        return {}
    if not d.manifest_sha256:
        raise ManifestError(f"the run names the data manifest {d.manifest} without its hash "
                            "(data.manifest_sha256; create-run fills it in)")
    return dict(manifest=load_manifest(d.manifest, d.manifest_sha256),
                manifest_location=d.manifest)


def make_provider(spec, run_id, identity, seq_len, heldout=False, pinned=None):
    """The training (or held-out) data provider; `pinned`: `data_pinning(spec)` when the
    caller already has it (a manifest is loaded once for both providers), else loaded here."""
    d = spec.data
    seed = bytes(32) if heldout else bytes.fromhex(d.shuffle_seed)
    if pinned is None and (d.heldout_dir or d.heldout_urls or not heldout):
        pinned = data_pinning(spec, warn=not heldout)
    pinned = pinned or {}
    if heldout:
        if d.heldout_dir:
            return LocalDataProvider(d.heldout_dir, d.token_size, seq_len, **pinned)
        if d.heldout_urls:
            return HttpDataProvider(list(d.heldout_urls), d.token_size, seq_len, **pinned)
        return None
    if d.kind == "server":
        return TcpDataProvider(d.address, run_id, identity, seq_len, d.token_size)
    if d.kind == "local":
        return LocalDataProvider(d.dir, d.token_size, seq_len, seed, **pinned)
    if d.kind == "http":
        return HttpDataProvider(list(d.urls), d.token_size, seq_len, seed, **pinned)
    raise ValueError(f"data kind {d.kind!r} has no provider")


class Metrics:
    """One JSON object per line, flushed at once so a killed client loses nothing logged; also
    sent to wandb when a project is named and wandb is installed and configured."""

    def __init__(self, path=None, wandb_args=None):
        # unbuffered bytes: each record goes out in one write call (a text file's buffer split
        # long records into several), appended whole; readers still skip an unfinished last line
        self.f = open(path, "ab", buffering=0) if path else None
        self.wandb = None
        if wandb_args and wandb_args.get("project"):
            try:
                import wandb
                self.wandb = wandb.init(**{k: v for k, v in wandb_args.items() if v})
            except Exception as e:  # not installed, not logged in, offline: keep training
                logger.warning(f"wandb disabled: {type(e).__name__}: {e}")

    def write(self, **record):
        if self.f:
            line = memoryview((json.dumps({"time": round(time.time(), 3), **record}) + "\n")
                              .encode())
            while line:  # a raw write may take less than it was given
                line = line[self.f.write(line):]
        if self.wandb is not None:
            self.wandb.log({f"{record['event']}/{k}": v for k, v in record.items()
                            if isinstance(v, (int, float)) and k != "step"},
                           step=record.get("step"))


def _copy(recorded: str, used: str) -> str:
    if used == recorded:
        return recorded[:16]
    return (f"{used[:16]}: the recorded copy {recorded[:16]} did not load to the recorded hash, "
            "another copy of the same parameters did")


class DistroTrainer:
    def __init__(self, spec, run_id: str, identity, log=None, metrics=None, device="cpu",
                 micro_batch_size=8, data_parallelism=1):
        if int(data_parallelism) < 1:
            raise ValueError(f"data_parallelism must be >= 1, not {data_parallelism}")
        self.spec, self.run_id, self.identity = spec, run_id, identity
        self._log_callback = log  # handed on to the data-parallel group
        self.log, self.metrics = log or logger.info, metrics or Metrics()
        load_model_code()  # now, not in the warmup of the first epoch this client joins
        o = spec.optimizer
        # what every peer's result must fit: known before any model is loaded
        self.layout = result_layout(parameter_shapes(spec.model), o.chunk, o.topk,
                                    o.quantize_1bit)
        self.device, self.micro_batch_size = torch.device(device), micro_batch_size
        self.data_parallelism = int(data_parallelism)
        self.model = self.optimizer = self.provider = self.heldout = self.group = None
        self.params_step = None  # the step whose training starts from the current parameters
        self.compressed_step = None  # the last step this client trained (its lookahead's step)
        self.applied_step = None  # the last step whose results are in the parameters
        self.replicas_stale = False  # data-parallel replicas hold rank 0's lookahead parameters
        self.total_steps = None  # the run's, for the learning-rate schedule
        self.base = None  # (step, parameters on the CPU) a syncing client replays from
        self.base_location = None  # the store location the base came from (None: the run seed)
        self.last_loss = None

    # ---------------------------------------------------------------- setup
    def prepare(self, epoch: int, state, fetch_snapshot=None) -> str:
        """Have the parameters the epoch starts from, and return their hash: the ones held
        already when they are those (the recorded snapshot's hash for a Stored checkpoint, else
        params_step is the epoch's first step), else the recorded snapshot from the run's store
        (Stored), the run seed's (Dummy, at the run's first step only) or the peers' snapshot
        (P2P: `fetch_snapshot(step, layout, max_size)` returns a verified (manifest, bytes); it
        runs on the daemon's event loop)."""
        ck = state.checkpoint
        kind = ck.kind
        if self.model is not None:
            held = parameter_hash(self.model)
            if kind == CheckpointKind.Stored and held == ck.hash.hex():
                self.params_step = state.step
                self.log(f"model: keeping the held parameters, they are the recorded snapshot's "
                         f"(step {ck.step}, params {held[:16]})")
                return held
            if kind != CheckpointKind.Stored and self.params_step == state.step:
                return held
        config = getattr(state, "config", None)
        self.total_steps = config.total_steps if config is not None else None
        if kind == CheckpointKind.P2P and fetch_snapshot is None:
            raise ModelUnavailable(
                f"the run is at step {state.step} with a P2P checkpoint: its current model is "
                "with the epoch's other clients, and this client has no way to fetch it")
        if kind == CheckpointKind.Dummy and state.step > 1:
            raise ModelUnavailable(
                f"the run is at step {state.step} and no snapshot recorded its model (Dummy "
                "checkpoint): starting from the run seed's weights would train random weights "
                "at that step. Configure a snapshot store ([checkpoint] store) so checkpointers "
                "record one, or set the run's checkpoint to where the model is")
        if kind not in (CheckpointKind.Dummy, CheckpointKind.P2P, CheckpointKind.Stored):
            raise ModelUnavailable(
                f"the run is at step {state.step} with a {kind.name} checkpoint, which this "
                "client cannot load (the run seed, stored snapshots and peer-to-peer sharing "
                "are implemented)")
        # every client draws the same initial weights from the run's seed; a joiner then
        # overwrites them with the peers' snapshot (the model's shape comes from the spec)
        model = build_model(self.spec.model, state.run_seed, self.device)
        source = "the run seed"
        if kind == CheckpointKind.P2P:
            self._load_from_peers(model, state, fetch_snapshot)
            source = f"the peers' snapshot for step {state.step}"
        elif kind == CheckpointKind.Stored:
            used = load_stored(model, self.spec.checkpoint, ck.repo, ck.hash.hex(), ck.step)
            source = f"the recorded snapshot of step {ck.step} ({_copy(ck.repo, used)})"
        sources = {CheckpointKind.P2P: "peers", CheckpointKind.Stored: "store"}
        digest = self._install(model, state, state.step, source, sources.get(kind, "seed"))
        self.evaluate(epoch, state.step - 1)
        return digest

    def load_base(self, state):
        """The base a client that joins mid-epoch replays from (and replays from again when it
        lags): the run's recorded snapshot (checkpoint.hash nonzero, its hash checked), else,
        for a run whose checkpoint is the run seed (kind Dummy), the seed's model, which trains
        step 1. A copy is kept for reset_to_base. Returns (the step it trains, its hash)."""
        ck = state.checkpoint
        config = getattr(state, "config", None)
        self.total_steps = config.total_steps if config is not None else None
        model = build_model(self.spec.model, state.run_seed, self.device)
        if ck.hash != bytes(32):
            used = load_stored(model, self.spec.checkpoint, ck.repo, ck.hash.hex(), ck.step)
            step, kind, self.base_location = ck.step, "store", used
            source = f"the recorded snapshot of step {ck.step} ({_copy(ck.repo, used)})"
        elif ck.kind == CheckpointKind.Dummy:
            step, source, kind, self.base_location = 1, "the run seed", "seed", None
        else:
            raise ModelUnavailable(f"no snapshot is recorded and the run is at step {state.step}"
                                   ": nothing to replay from")
        self.base = (step, [p.detach().to("cpu", copy=True) for p in model.parameters()])
        return step, self._install(model, state, step, source, kind)

    def reset_to_base(self):
        """Put the kept base back (a fresh optimizer state); returns (its step, its hash)."""
        if self.base is None:
            raise RuntimeError("no base model kept")
        step, saved = self.base
        with torch.no_grad():
            for p, b in zip(self.model.parameters(), saved):
                p.copy_(b.to(p.device))
        if self.group is not None:
            self.group.sync_params(self.model)
        self._fresh_optimizer()
        self.params_step = step
        digest = parameter_hash(self.model)
        self.log(f"model: back to the base of step {step}, params {digest[:16]}")
        return step, digest

    def _fresh_optimizer(self) -> None:
        o = self.spec.optimizer
        # a fresh DisTrO state: its momentum is this client's own, nobody else depends on it
        self.optimizer = DistroOptimizer(self.model.parameters(), lr=o.lr,
                                         momentum_decay=o.momentum_decay,
                                         weight_decay=o.weight_decay, chunk=o.chunk, topk=o.topk,
                                         quantize_1bit=o.quantize_1bit,
                                         lookahead=o.lookahead, clip=o.clip,
                                         screen=o.screen, max_grad_norm=o.grad_clip or None)
        if self.optimizer.layout() != self.layout:  # the validation thread checks against it
            raise RuntimeError("the optimizer's result layout is not the one the spec gives")
        self.compressed_step = self.applied_step = None
        self.replicas_stale = False

    def _install(self, model, state, step: int, source: str, kind: str) -> str:
        """Make `model` (which trains `step`) the one this trainer trains; returns its hash."""
        seq_len = self.spec.model.max_seq_len
        self.close()  # a stale model's data-parallel replicas go with it
        self.model = None
        if self.data_parallelism > 1:
            # the replicas draw the same weights; the broadcast makes sure of it (checked below)
            group = DataParallelGroup(self.spec.model, state.run_seed, self.data_parallelism,
                                      self.device, self.micro_batch_size,
                                      log=self._log_callback)
            try:
                group.sync_params(model)
                self._check_replicas(group, parameter_hash(model))
            except BaseException:
                group.close()
                raise
            self.group = group
        self.model, self.params_step = model, step
        self._fresh_optimizer()
        if self.provider is None:
            pinned = data_pinning(self.spec)
            self.provider = make_provider(self.spec, self.run_id, self.identity, seq_len,
                                          pinned=pinned)
            self.heldout = make_provider(self.spec, self.run_id, self.identity, seq_len,
                                         heldout=True, pinned=pinned)
        count, digest = parameter_count(self.model), parameter_hash(self.model)
        self.metrics.write(event="model", step=step, parameters=count, params=digest,
                           source=kind)
        self.log(f"model: Llama with {count:,} parameters from {source}, params {digest[:16]}")
        return digest

    def _load_from_peers(self, model, state, fetch_snapshot) -> None:
        step = state.step
        layout, _ = layout_of(model)
        manifest, data = fetch_snapshot(step, layout, size_limit(model))
        try:
            load_snapshot(model, data)
        except SnapshotError as e:
            raise ModelUnavailable(f"the peers' snapshot for step {step} does not load: {e}")
        digest = parameter_hash(model)
        if digest != manifest.params:  # the blob matched its hash, but not the params claimed
            raise ModelUnavailable(f"the peers' snapshot for step {step} loads to params "
                                   f"{digest[:16]}, not the {manifest.params[:16]} they offered")
        agreed = getattr(state, "param_hash", bytes(32))
        if agreed != bytes(32) and digest != agreed.hex():
            raise ModelUnavailable(f"the peers' snapshot for step {step} has params "
                                   f"{digest[:16]}, not the {agreed.hex()[:16]} the witnesses "
                                   f"agreed on at step {state.param_step}")

    def snapshot(self, step: int, encode: bool = True):
        """Called once every round of an epoch is applied: the parameters are now the ones the
        next epoch starts at `step` from. Returns (safetensors bytes, manifest fields) for
        model sharing, or None when not `encode` or there is no model."""
        if self.model is None:
            return None
        self.params_step = step
        if not encode:
            return None
        started = time.time()
        data = encode_snapshot(self.model)
        layout, count = layout_of(self.model)
        digest = parameter_hash(self.model)
        self.metrics.write(event="snapshot", step=step, params=digest, bytes=len(data),
                           compute_s=round(time.time() - started, 4))
        return data, dict(step=step, params=digest, layout=layout, parameters=count)

    def capture(self):
        """The parameters as a Hugging Face layout snapshot: ({file name: bytes}, params hash).
        Called in the worker after the applies asked for before it: the parameters are then
        exactly those of the step the snapshot is labelled with."""
        if self.model is None:
            raise RuntimeError("no model to snapshot")
        return hf_files(self.model), parameter_hash(self.model)

    # ---------------------------------------------------------------- the three duties
    def _tokens(self, batch) -> torch.Tensor:
        """The batch's sequences from the run's data provider, on this trainer's device."""
        return torch.from_numpy(np.ascontiguousarray(
            self.provider.get_samples(batch.start, batch.end))).to(self.device)

    def train(self, step: int, batch, state) -> bytes:
        started = time.time()
        tokens = self._tokens(batch)
        self.model.train()
        self.model.zero_grad(set_to_none=True)
        n = len(tokens)
        lookahead = self._lookahead(step)
        try:
            if self.group is not None:  # every rank a share; rank 0's p.grad holds the sum after
                if lookahead or self.replicas_stale:
                    self.group.sync_params(self.model)  # the replicas train where rank 0 does
                    self.replicas_stale = lookahead
                total = self.group.train(self.model, tokens)
            else:
                total = forward_backward(self.model, tokens, n, self.micro_batch_size)
        finally:
            self.optimizer.remove_lookahead()  # bit-exact: the parameters are the consensus's
        self.last_loss = total / n
        sparse = self.optimizer.compress_step(self._lr(step))
        self.compressed_step = step
        payload = encode_payload(sparse, rice=self.spec.optimizer.rice)
        self.metrics.write(event="train", step=step, loss=self.last_loss, sequences=n,
                           payload_bytes=len(payload), started=round(started, 3),
                           compute_s=round(time.time() - started, 4))
        self.log(f"step {step}: loss {self.last_loss:.4f} on {batch}, "
                 f"result {len(payload):,} bytes")
        return payload

    def _lr(self, step: int) -> float:
        return self.spec.optimizer.lr_at(step, self.total_steps)

    def _lookahead(self, step: int) -> bool:
        """Step in this client's own update of the previous step when it is still in flight
        (trained, not yet applied); a client that did not train that step has none."""
        prev = step - 1
        if (not self.optimizer.lookahead or self.compressed_step != prev
                or (self.applied_step is not None and self.applied_step >= prev)):
            return False
        self.optimizer.apply_lookahead(self._lr(prev))
        return True

    def validate(self, result) -> tuple:
        """('', fingerprint) when a peer's result may be vouched for, else (why not, None).
        Runs on the daemon's validation thread, beside the training: it reads only the layout."""
        try:
            params = check_payload(result.payload, self.layout)
        except ValueError as e:
            return str(e), None
        return "", fingerprint(params)

    def verify(self, step: int, result, compare, previous=None, last=None) -> tuple:
        """Judge a peer's result (judge.py, after Templar's Gauntlet: does it help the batch it
        was trained on?): the gradient of its batch, and of `compare` (another batch of the
        round, for the log: an honest update is aimed at its own batch), at the parameters
        its trainer trained `step` with: this client's (those that train `step`), with the
        lookahead of `previous` (the trainer's result of `step - 1`, when it trained that step)
        stepped in as the trainer did. Bad when, on its own batch, its sign score is under
        judge.SIGN_Z_MIN (noise, zeros, a flipped sign) or its step's score under
        judge.STEP_MIN (a step up the batch); with `last` (the trainer's last result before
        `step`, no batch trained between), the overlap test first (judge.py: the coefficients
        sent in both hold this batch's gradient alone). Copies and replays, which point down
        too, are the validation's to catch. Returns (bad, what was measured)."""
        peer = peer_result_from_training_result(result, layout=self.layout)
        lookahead = self._lookahead_of(step, previous)
        try:
            grads = [self._gradient(b) for b in (result.batch, compare)]
        finally:
            if lookahead:
                self.optimizer.remove_lookahead()
        transforms = self.optimizer.transforms
        voted = [votes(peer, g, transforms) for g in grads]  # one DCT per gradient
        signs = [sign_score(v) for v in voted]
        steps = step_gain(peer, grads, transforms)
        ov = None
        if last is not None:
            try:
                ov = overlap(peer, peer_result_from_training_result(last, layout=self.layout),
                             voted[0], transforms)
            except ValueError:  # its last result does not decode: the plain test
                pass
        bad = is_bad(signs[0], steps[0], ov)
        detail = (f"signs {signs[0]:.2f}, step {steps[0]:.3f} on its batch; {signs[1]:.2f}, "
                  f"{steps[1]:.3f} on {compare}{' with its lookahead' if lookahead else ''} "
                  f"(bad under {SIGN_Z_MIN:g}, {STEP_MIN:g})")
        if ov is not None:
            detail += (f"; overlap with its step {last.step}: {ov.agree:.2f} of {ov.count} agree,"
                       f" signs {ov.rest_sign_z:.2f} elsewhere (the overlap decides from"
                       f" {OVERLAP_MIN} on)")
        self.metrics.write(event="verify", step=step, trainer=result.trainer.hex(),
                           sign_z=signs[0], step_gain=steps[0], sign_z_other=signs[1],
                           step_gain_other=steps[1], lookahead=lookahead, bad=bad,
                           overlap=None if ov is None else ov.count,
                           overlap_agree=None if ov is None else ov.agree,
                           rest_sign_z=None if ov is None else ov.rest_sign_z)
        return bad, detail

    def _lookahead_of(self, step: int, previous) -> bool:
        """Step in the lookahead a trainer stood at for `step`: the update of its `previous`
        result (the same bits as its own, update_signs). False when there is none to take: the
        run trains without lookahead, the trainer did not train `step - 1`, or that result does
        not decode (its trainer's, refused anyway; judged from the parameters as they are)."""
        if previous is None or not self.optimizer.lookahead:
            return False
        try:
            prior = peer_result_from_training_result(previous, layout=self.layout)
        except ValueError:
            return False
        self.optimizer.apply_lookahead(self._lr(step - 1),
                                       update_signs(self.optimizer.transforms, prior.params))
        return True

    def _gradient(self, batch) -> list:
        """The mean-loss gradient of `batch` at the current parameters (float32, CPU), which
        stay as they are."""
        tokens = self._tokens(batch)
        self.model.train()
        self.model.zero_grad(set_to_none=True)
        try:
            forward_backward(self.model, tokens, len(tokens), self.micro_batch_size)
            return [p.grad.detach().to("cpu", torch.float32) for p in self.optimizer.params]
        finally:
            self.model.zero_grad(set_to_none=True)

    def apply(self, step: int, results: list) -> str:
        """Apply a round's results; returns the parameter hash after them. A result that does
        not decode is left out, by every client alike (the decoder is deterministic): no
        payload, however malformed, makes an apply fail."""
        started = time.time()
        peers, applied = [], []
        for r in results:
            try:
                peers.append(peer_result_from_training_result(r, layout=self.layout))
                applied.append(r)
            except ValueError as e:
                self.log(f"apply step {step}: left out the result of {r.trainer.hex()[:8]} "
                         f"for {r.batch}: {e}")
        left_out = {x.key: x.why for x in self.optimizer.apply_results(peers, self._lr(step))}
        results = []
        for peer, r in zip(peers, applied):
            if peer.key in left_out:
                self.log(f"apply step {step}: the screen left out the result of "
                         f"{r.trainer.hex()[:8]} for {r.batch}: {left_out[peer.key]}")
            else:
                results.append(r)
        self.applied_step = step
        if self.group is not None:
            self.group.sync_params(self.model)
            self.replicas_stale = False
            digest = self._check_replicas(self.group)
        else:
            digest = parameter_hash(self.model)
        self.metrics.write(event="apply", step=step, results=len(results), params=digest,
                           trainers=[r.trainer.hex() for r in results],
                           compute_s=round(time.time() - started, 4))
        replicas = f" on {self.data_parallelism} replicas" if self.group is not None else ""
        self.log(f"applied step {step}: {len(results)} results, params {digest[:16]}{replicas}")
        return digest

    def _check_replicas(self, group, digest=None) -> str:
        """Rank 0's parameter hash, after checking every replica has the same (the workers hash
        while rank 0 does)."""
        group.request_hashes()
        digest = digest or parameter_hash(self.model)
        hashes = group.collect_hashes()
        bad = [r for r, h in enumerate(hashes, start=1) if h != digest]
        if bad:
            raise RuntimeError(f"data-parallel replicas {bad} differ from rank 0 "
                               f"(params {digest[:16]} vs {hashes[bad[0] - 1][:16]})")
        return digest

    def close(self) -> None:
        """Stop the data-parallel workers, if any (they also exit when this process does)."""
        if self.group is not None:
            self.group.close()
            self.group = None

    def evaluate(self, epoch: int, step: int):
        if self.heldout is None:
            return None
        loss = heldout_loss(self.model, self.heldout, self.spec.data.heldout_sequences,
                            self.micro_batch_size, self.device)
        self.metrics.write(event="heldout", epoch=epoch, step=step, loss=loss)
        self.log(f"held-out loss {loss:.4f} (epoch {epoch}, after step {step}, "
                 f"perplexity {math.exp(min(loss, 50)):.1f})")
        return loss
