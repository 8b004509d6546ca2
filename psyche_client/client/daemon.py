"""The client daemon: the imperative shell around ClientStateMachine.

It feeds the machine coordinator states from the backend, verified results from peers, finished
training and the time, and carries out the actions the machine returns."""

import asyncio
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor

from psyche_coordinator_core import CoordinatorError, RoundCommittee, RunState

from ..backends.base import BackendError, FatalBackendError
from ..data.manifest import DataHashMismatch, ManifestError
from ..training.errors import ModelUnavailable
from .actions import (
    Action,
    Apply,
    Evaluate,
    FetchApplied,
    FetchResults,
    LoadBase,
    Log,
    Prepare,
    PruneSnapshots,
    Publish,
    ResetToBase,
    Send,
    Snapshot,
    StoreSnapshot,
    Train,
    Validate,
    Verify,
)
from .leaving import RunIsFull, withdraw
from .results import TrainingResult
from .state_machine import ClientStateMachine

log = logging.getLogger(__name__)

TIMER_INTERVAL = 0.5
MODEL_FETCH_TIMEOUT = 300.0  # seconds a joiner keeps trying to get the model from its peers


class EpochOver(Exception):
    """The epoch a model was being fetched for ended first: the peers now offer the next
    epoch's starting point, and the client prepares again in that epoch's warmup."""


class ClientDaemon:
    def __init__(self, identity, backend, transport, make_trainer, clock=time.time,
                 exit_when_finished=True, model_fetch_timeout=MODEL_FETCH_TIMEOUT,
                 make_writer=None, contributor: bytes = None):
        """`transport` carries results between peers (psyche_client.p2p.transport); the daemon
        receives them through its on_result, and shares the model through its model_sharing
        (if any) with clients joining a run in progress. `make_trainer(spec)` builds the trainer
        once the backend has told the run's spec; `make_writer(spec)` the SnapshotWriter of a
        checkpointer (None: this client writes no snapshots). `contributor`: the identity this
        node key acts for (its points go there; None: itself), by a delegation the backend
        presents."""
        self.identity, self.backend, self.transport = identity, backend, transport
        transport.on_result = self.on_peer_result
        self.sharing = getattr(transport, "model_sharing", None)
        self.model_fetch_timeout = model_fetch_timeout
        self.make_trainer, self.trainer = make_trainer, None
        self.make_writer, self.writer = make_writer, None
        self.clock = clock
        self.exit_when_finished = exit_when_finished
        self.sm = ClientStateMachine(identity.public, identity.public,
                                     tick_jitter=random.uniform(0.2, 2.0), identity=contributor)
        # the applied sets this client keeps, served to syncing peers (iroh only)
        self.applied_sharing = getattr(transport, "applied_sharing", None)
        if self.applied_sharing is not None:
            self.applied_sharing.lookup = self.sm.kept_set
            self.applied_sharing.received = self.sm.received_results
        self._tasks = set()
        self._last_phase = None
        self._stop = asyncio.Event()  # set when this client must leave the run
        self._exit_code = None  # leave()'s code: the process was asked to exit
        # RunIsFull or a FatalBackendError (NotAllowed): the run refused this client for good
        self._refusal = None
        # one worker: prepare, apply, train and evaluate run in the order they were asked for
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainer")
        # one more for the snapshots' writes and uploads: in order, beside the training
        self._uploader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshots")
        # and one that checks the peers' results, in arrival order, while the worker trains
        self._validator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="validation")

    def leave(self, code: int) -> None:
        """Withdraw from the run and exit with `code` (a SIGINT or SIGTERM asked for it)."""
        if self._exit_code is None:
            self._exit_code = code
        self._stop.set()

    async def _in_worker(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    def _spawn(self, coro):
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def _run(self, actions: list[Action]) -> None:
        for act in actions:
            match act:
                case Send(op, args):
                    self._spawn(self._send(op, args))
                case Prepare(epoch):
                    self._spawn(self._prepare(epoch))
                case Train(step, batch):
                    self._spawn(self._train(step, batch))
                case Apply(step, results):
                    self._spawn(self._apply(step, results))
                case Validate(result):
                    self._spawn(self._validate(result))
                case Verify(step, result, compare, previous, last):
                    self._spawn(self._verify(step, result, compare, previous, last))
                case LoadBase():
                    self._spawn(self._base("load_base", self.sm.state))
                case ResetToBase():
                    self._spawn(self._base("reset_to_base"))
                case FetchApplied(step, exclude):
                    self._spawn(self._fetch_applied(step, exclude))
                case FetchResults(step):
                    self._spawn(self._fetch_results(step))
                case Evaluate(epoch, step):
                    self._spawn(self._guard("evaluate",
                                            self._in_worker(self.trainer.evaluate, epoch, step)))
                case Snapshot(step):
                    self._spawn(self._guard(f"snapshot for step {step}", self._snapshot(step)))
                case StoreSnapshot(epoch, step, upload):
                    self._spawn(self._guard(f"storing the snapshot of step {step}",
                                            self._store_snapshot(epoch, step, upload)))
                case PruneSnapshots():
                    self._spawn(self._guard("pruning the snapshot store", self._prune()))
                case Publish(result):
                    self._spawn(self._guard("publishing a result", self.transport.publish(result)))
                case Log(text):
                    log.info("%s", text)

    async def _send(self, op, args):
        try:
            await self.backend.send(op, args)
            self._run(self.sm.op_finished(op, None, args))
            if op in ("warmup_witness", "witness", "health_check", "join"):
                log.info("sent %s%s", op, f" for step {args['step']}" if op == "witness" else "")
        except CoordinatorError as e:
            if op == "join" and e.code == "RunFull" and self.sm.state is not None:
                self._refusal = RunIsFull(self.sm.state.config.max_clients)
                self._stop.set()  # no waiting list: asking again cannot help
                return
            # a tick or a settle that another client sent first changes nothing: no warning
            if not (op == "tick" or e.code in ("AlreadyJoined",)
                    or (op == "settle" and e.code == "NothingToSettle")):
                log.warning("%s rejected: %s: %s", op, e.code, e.detail)
            self._run(self.sm.op_finished(op, e.code, args))
        except FatalBackendError as e:  # NotAllowed: the server will never admit this client
            self._refusal = e
            self._stop.set()
        except BackendError as e:
            log.warning("%s not delivered: %s", op, e)
            self._run(self.sm.op_finished(op, "Unreachable", args))

    async def _apply(self, step, results):
        digest = await self._guard(f"apply step {step}",
                                   self._in_worker(self.trainer.apply, step, results))
        # the witness of step + 2 commits this hash; a failed apply commits none
        self._run(self.sm.applied_params(step, bytes.fromhex(digest) if digest else None))

    async def _validate(self, result):
        check = getattr(self.trainer, "validate", None)
        why, fingerprint = "", None
        if check is not None:
            try:
                why, fingerprint = await asyncio.get_running_loop().run_in_executor(
                    self._validator, check, result)
            except Exception as e:  # a result the check cannot handle is not vouched for
                why = f"validation failed: {type(e).__name__}: {e}"
        self._run(self.sm.validated(result, why, fingerprint))

    async def _verify(self, step, result, compare, previous, last):
        got = await self._guard(f"verifying a result of step {step}",
                                self._in_worker(self.trainer.verify, step, result, compare,
                                                previous, last))
        if got is not None:
            self._run(self.sm.verified(step, result, *got))

    async def _base(self, how, *args):
        """Load (or put back) the base a syncing client replays from, in the worker: after the
        applies asked for before it, before those asked for after."""
        try:
            step, digest = await self._in_worker(getattr(self.trainer, how), *args)
        except Exception as e:  # no base: the machine waits for the next snapshot
            log.warning("base model: %s: %s", type(e).__name__, e)
            self._run(self.sm.base_failed(f"{type(e).__name__}: {e}"))
            return
        self._run(self.sm.base_ready(step, bytes.fromhex(digest)))

    def _sync_peers(self) -> list:
        """The p2p ids of the epoch's clients whose models follow the run (Active or WarmingUp:
        they keep applied sets) that the backend has an address for."""
        st, known = self.sm.state, self.backend.peers()
        own = self.identity.public.hex()
        ids = [c.p2p_identity.hex() for c in (st.clients if st is not None else []) if c.trains]
        return [p for p in ids if p != own and p in known]

    async def _fetch_applied(self, step, exclude):
        got, peer = None, None
        if self.applied_sharing is not None:
            try:
                got, peer = await self.applied_sharing.fetch(self._sync_peers(), step,
                                                             exclude=exclude, log=log.debug)
            except Exception as e:  # the machine hears "nobody had it" and decides
                log.warning("fetching the applied set of step %d: %s: %s", step,
                            type(e).__name__, e)
        if got is not None:
            log.info("applied set of step %d from %s: %d results", step, peer[:8],
                     len(got.results))
        self._run(self.sm.fetched(step, got, peer))

    async def _fetch_results(self, step):
        if self.applied_sharing is None:
            return
        results = await self._guard(f"fetching the results of step {step}",
                                    self.applied_sharing.fetch_received(
                                        self._sync_peers(), step, log=log.debug))
        log.info("results of step %d from peers: %d", step, len(results or []))
        for r in results or []:
            self._run(self.sm.on_result(r))

    async def _guard(self, what, coro):
        try:
            return await coro
        except Exception as e:  # a failed duty is reported; the client keeps serving the run
            log.warning("%s failed: %s: %s", what, type(e).__name__, e)
            return None

    async def _prepare(self, epoch):
        loop = asyncio.get_running_loop()

        def fetch_snapshot(step, layout, max_size):
            # called by the trainer in the worker thread, which waits while the event loop
            # talks to the peers: whatever the worker is asked to do next (the epoch's training
            # and applies) stays queued behind the model it needs
            fut = asyncio.run_coroutine_threadsafe(
                self._fetch_model(step, layout, max_size, epoch), loop)
            return fut.result()

        try:
            digest = await self._in_worker(self.trainer.prepare, epoch, self.sm.state,
                                           fetch_snapshot)
        except (ModelUnavailable, DataHashMismatch, ManifestError) as e:
            # training anyway would only publish diverged results, or ones of other data
            log.error("cannot take part: %s", e)
            self._stop.set()
            return
        except Exception as e:  # no warmup witness: the run starts without this client
            log.warning("model loading failed: %s: %s", type(e).__name__, e)
            return
        log.info("model ready for epoch %d", epoch)
        self._run(self.sm.model_ready(epoch, bytes.fromhex(digest) if digest else None))

    def _model_peers(self) -> list:
        """The p2p ids of this epoch's other clients that the backend has an address for."""
        st, known = self.sm.state, self.backend.peers()
        own = self.identity.public.hex()
        ids = [c.p2p_identity.hex() for c in (st.clients if st is not None else [])]
        return [p for p in ids if p != own and p in known]

    async def _fetch_model(self, step, layout, max_size, epoch=None):
        if self.sharing is None:
            raise ModelUnavailable(
                f"the run is at step {step} and its current model is with the epoch's other "
                "clients: only the iroh transport can fetch it (use --p2p iroh, not ws)")
        log.info("fetching the model for step %d from the epoch's other clients", step)

        def peers():  # asked before every attempt
            st = self.sm.state
            if epoch is not None and st is not None and st.epoch != epoch:
                # the peers keep only their latest snapshot: this one will never come again
                raise EpochOver(f"epoch {epoch} ended before its model (step {step}) arrived")
            return self._model_peers()

        try:
            return await self.sharing.fetch(peers, step, layout, max_size,
                                            timeout=self.model_fetch_timeout)
        except EpochOver:
            raise  # not fatal: _prepare gives up on this epoch only
        except Exception as e:  # ModelSharingError: the peers never delivered a verified model
            raise ModelUnavailable(f"{type(e).__name__}: {e}") from None

    async def _snapshot(self, step):
        share = self.sharing is not None  # without sharing, only note that the epoch is applied
        snap = await self._in_worker(self.trainer.snapshot, step, share)
        if snap is None:
            return
        data, fields = snap
        m = self.sharing.offer(data, **fields)
        log.info("sharing the model for step %d: params %s, %s bytes", step, m.params[:16],
                 f"{m.size:,}")

    async def _store_snapshot(self, epoch, step, upload):
        # captured in the worker, queued after the applies asked for before it: the parameters
        # are those of `step`; writing and uploading go on beside the training
        files, digest = await self._in_worker(self.trainer.capture)
        loop = asyncio.get_running_loop()
        path = await loop.run_in_executor(self._uploader, self.writer.write, epoch, step, digest,
                                          files)
        if not upload:
            return
        location = await loop.run_in_executor(self._uploader, self.writer.upload, path)
        if location is not None:
            self._run(self.sm.snapshot_stored(step, bytes.fromhex(digest), location))

    async def _prune(self):
        if self.writer is not None and self.writer.store is not None:
            await asyncio.get_running_loop().run_in_executor(self._uploader, self.writer.prune)

    async def _train(self, step, batch):
        try:
            payload = await self._in_worker(self.trainer.train, step, batch, self.sm.state)
        except (DataHashMismatch, ManifestError) as e:  # not the run's data: no retry helps
            log.error("cannot take part: %s", e)
            self._stop.set()
            return
        except Exception as e:
            log.warning("training step %d %s failed: %s: %s", step, batch, type(e).__name__, e)
            return
        result = TrainingResult.create(self.identity, step, batch, payload)
        log.info("trained step %d %s", step, batch)
        self._run(self.sm.trained(step, result))

    def on_peer_result(self, result: TrainingResult) -> None:
        self._run(self.sm.on_result(result))

    async def _timer(self):
        while True:
            await asyncio.sleep(TIMER_INTERVAL)
            self.transport.set_peers(self.backend.peers())
            self._run(self.sm.on_timer(self.clock()))

    def _note_phase(self, st):
        phase = (st.run_state, st.epoch, st.step)
        if phase != self._last_phase:
            self._last_phase = phase
            me = self.sm.my_index()
            role = ""
            if me is not None and st.run_state == RunState.RoundTrain:
                if RoundCommittee(st.current_round, st.config.witness_nodes, 0).is_witness(me):
                    role = " (witness)"
            log.info("coordinator: %s epoch %d step %d%s", st.run_state.name, st.epoch, st.step,
                     role)

    def _use_trainer(self, trainer) -> None:
        self.trainer = trainer
        layout = getattr(trainer, "layout", None)  # simulated training has none
        if layout is not None:
            # the validation's size bound, applied on receipt: a larger result is dropped before
            # it is downloaded or hashed (imported here: the model's trainer has loaded torch)
            from ..training.validation import max_payload_bytes
            self.sm.max_payload = self.transport.max_result_bytes = max_payload_bytes(layout)

    async def run(self) -> int:
        await self.backend.connect()
        # in the worker: making a trainer imports its libraries (tens of seconds on a loaded
        # machine), and the connection must keep answering meanwhile; the client joins after
        spec = await self.backend.spec()
        self._use_trainer(await self._in_worker(self.make_trainer, spec))
        if self.make_writer is not None and hasattr(self.trainer, "capture"):
            # simulated training has no model to snapshot
            self.writer = self.make_writer(spec)
        if self.writer is not None:
            self.sm.checkpointing.can_store = self.writer.store is not None
            self.sm.checkpointing.saves_locally = self.writer.checkpoint_dir is not None
        timer = asyncio.ensure_future(self._timer())
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            while True:
                nxt = asyncio.ensure_future(self.backend.next_state())
                await asyncio.wait([nxt, stop], return_when=asyncio.FIRST_COMPLETED)
                if stop.done():
                    nxt.cancel()
                    if self._refusal is not None:
                        raise self._refusal
                    # on a chain nothing else tells the coordinator that this client left
                    await withdraw(self.backend, self.identity.public)
                    return self._exit_code if self._exit_code is not None else 3
                st = nxt.result()
                self.transport.set_peers(self.backend.peers())
                self._note_phase(st)
                self._run(self.sm.on_state(st, self.clock()))
                if st.run_state == RunState.Finished and self.exit_when_finished:
                    log.info("run finished")
                    return 0
        finally:
            timer.cancel()
            stop.cancel()
            for t in list(self._tasks):
                t.cancel()
            await self.backend.close()
            await self.transport.close()
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._uploader.shutdown(wait=False, cancel_futures=True)
            self._validator.shutdown(wait=False, cancel_futures=True)
            close = getattr(self.trainer, "close", None)
            if close is not None:  # a data-parallel trainer stops its worker processes
                close()
