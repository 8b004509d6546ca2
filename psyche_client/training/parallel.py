"""Data parallelism inside one client (`--data-parallelism N`): N replicas of the model, one per
device, train one batch together and the client publishes one result.

Rank 0 is the client's own trainer (its model and DistroOptimizer); ranks 1..N-1 are worker
processes started here (torch.multiprocessing, spawn, daemon), each holding a replica built from
the run seed on its own device (cuda: rank r on cuda:(base + r); cpu: all on the cpu). They form
a torch.distributed group (nccl on cuda, else gloo) over a TCPStore on 127.0.0.1 whose port the
OS picks (no race for a free port).

Commands travel from rank 0 to each worker over its own multiprocessing pipe, the collectives
after them over the process group:
  ("train", tokens, total)  forward/backward on this rank's share, then all_reduce of the
                            gradients (one flat buffer per dtype) and of the loss sum
  ("sync",)                 receive rank 0's parameters (broadcast, one flat buffer per dtype)
  ("hash",)                 reply ("hash", parameter_hash) over the pipe
  ("stop",)                 leave the group and exit
A rank whose forward/backward fails (out of memory, say) still takes part in the collectives with
zero gradients and a failure count, so the batch fails on rank 0 with the worker's traceback and
the group stays usable; a worker that dies breaks the group (gloo: the collective on rank 0 fails
at once; every later call raises). A worker exits when rank 0 goes away: its pipe reaches EOF,
and a watchdog thread notices the parent pid change even while the worker is blocked in a
collective. The process group has a timeout, and collectives only run while a command is in
flight, so an idle client never hits it.

Only forward/backward is parallel. The DisTrO step (compress_step), applying the consensus and the
held-out evaluation run on rank 0 alone; after each apply rank 0's parameters are broadcast, so
every replica stays bit-identical to rank 0 (checked by hash).

The processes are spawned, so the program that creates a group must guard its entry point with
``if __name__ == "__main__"`` (the client's command lines do)."""

import datetime
import logging
import os
import threading
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist

from .model import build_model, parameter_hash

# what each dtype travels as: gloo gets float32 for the 16-bit float types (exact for broadcast,
# a float32 sum for all_reduce); nccl reduces them natively
_GLOO_WIRE = {torch.bfloat16: torch.float32, torch.float16: torch.float32}

logger = logging.getLogger(__name__)


def forward_backward(model, tokens: torch.Tensor, total: int, micro_batch_size: int) -> float:
    """Accumulate into ``p.grad`` the gradient of ``sum(loss over these sequences) / total``, one
    micro-batch at a time; return the sum over these sequences of their mean token loss.

    With labels = input ids and sequences of equal length, every token of the whole batch weighs
    ``1 / (total * (seq_len - 1))`` however the sequences are split into micro-batches or ranks,
    so the sum over ranks of these gradients is the full batch's mean-loss gradient, as in
    single-process gradient accumulation."""
    loss_sum = 0.0
    if len(tokens) == 0:
        return loss_sum
    for micro in torch.split(tokens, micro_batch_size):
        loss = model(input_ids=micro, labels=micro).loss
        (loss * (len(micro) / total)).backward()  # gradient accumulation over micro-batches
        loss_sum += loss.item() * len(micro)
    return loss_sum


def share_bounds(n: int, world_size: int) -> list:
    """Contiguous, near-even shares of ``n`` sequences: rank r trains ``[b[r], b[r + 1])``
    (lower ranks get the extra sequences, so rank 0 has work whenever there is any)."""
    return [-(-n * r // world_size) for r in range(world_size + 1)]


def _by_dtype(params) -> dict:
    groups = {}
    for p in params:
        groups.setdefault(p.dtype, []).append(p)
    return groups  # insertion order: the same on every rank (same model)


def _wire(dtype, backend):
    return dtype if backend == "nccl" else _GLOO_WIRE.get(dtype, dtype)


@torch.no_grad()
def allreduce_grads(params, backend: str) -> None:
    """Sum every parameter's gradient over the group, one all_reduce per dtype; a missing
    gradient counts as zeros (a rank with no sequences), and every parameter has one after."""
    for dtype, ps in _by_dtype(params).items():
        wire = _wire(dtype, backend)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p))
                          .reshape(-1).to(wire) for p in ps])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p in ps:
            g = flat[offset:offset + p.numel()].view(p.shape)
            offset += p.numel()
            if p.grad is None:
                p.grad = g.to(dtype)
            else:
                p.grad.copy_(g)


@torch.no_grad()
def broadcast_params(params, backend: str, rank: int) -> None:
    """Every rank's parameters become rank 0's, bit for bit (one broadcast per dtype)."""
    for dtype, ps in _by_dtype(params).items():
        wire = _wire(dtype, backend)
        if rank == 0:
            flat = torch.cat([p.detach().reshape(-1).to(wire) for p in ps])
        else:
            flat = torch.empty(sum(p.numel() for p in ps), dtype=wire, device=ps[0].device)
        dist.broadcast(flat, src=0)
        if rank != 0:
            offset = 0
            for p in ps:
                p.copy_(flat[offset:offset + p.numel()].view(p.shape))
                offset += p.numel()


def _allreduce_values(values, device) -> list:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


# --------------------------------------------------------------------------- worker side
def _watch_parent(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(3)  # rank 0 is gone; nobody will ever send us a command again
        time.sleep(0.5)


def _worker_main(rank, world_size, backend, port, device, model_spec, seed, micro_batch_size,
                 timeout_s, threads, parent_pid, conn):
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    try:
        device = torch.device(device)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        if threads:
            torch.set_num_threads(threads)
        model = build_model(model_spec, seed, device)
        params = list(model.parameters())
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore("127.0.0.1", port, world_size, is_master=False, timeout=timeout)
        conn.send(("ready", rank))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timeout,
                                **({"device_id": device} if backend == "nccl" else {}))
        while True:
            try:
                cmd = conn.recv()
            except (EOFError, OSError):
                os._exit(3)  # rank 0 closed the pipe or died
            if cmd[0] == "train":
                _, tokens, total = cmd
                model.train()
                model.zero_grad(set_to_none=True)
                failed = 0.0
                try:
                    loss_sum = forward_backward(model, torch.from_numpy(tokens).to(device),
                                                total, micro_batch_size)
                except Exception:  # e.g. out of memory: contribute zeros, keep the group alive
                    model.zero_grad(set_to_none=True)
                    loss_sum, failed = 0.0, 1.0
                    conn.send(("train_failed", f"rank {rank}: {traceback.format_exc()}"))
                allreduce_grads(params, backend)
                _allreduce_values([loss_sum, failed], device)
                model.zero_grad(set_to_none=True)
            elif cmd[0] == "sync":
                broadcast_params(params, backend, rank)
            elif cmd[0] == "hash":
                conn.send(("hash", parameter_hash(model)))
            elif cmd[0] == "stop":
                break
            else:
                raise ValueError(f"unknown command {cmd[0]!r}")
        dist.destroy_process_group()
        conn.send(("stopped", rank))
    except BaseException:
        try:
            conn.send(("error", f"rank {rank}: {traceback.format_exc()}"))
        except Exception:
            pass
        os._exit(1)


# --------------------------------------------------------------------------- rank 0
class DataParallelGroup:
    """Ranks 1..world_size-1 for the trainer that creates it (rank 0, this process). Only one
    group per process (it uses the default torch.distributed group). Call ``close()`` when done;
    the workers also exit on their own if this process dies."""

    def __init__(self, model_spec, seed: int, world_size: int, device, micro_batch_size: int,
                 log=None, timeout_s: float = 600.0, start_timeout_s: float = 300.0):
        if world_size < 2:
            raise ValueError("a data-parallel group needs world_size >= 2")
        if dist.is_initialized():
            raise RuntimeError("torch.distributed is already initialized in this process "
                               "(one data-parallel group per process)")
        device = torch.device(device)
        if device.type == "cuda":
            base, count = device.index or 0, torch.cuda.device_count()
            if base + world_size > count:
                raise ValueError(f"data parallelism {world_size} on {device} needs cuda:{base}.."
                                 f"cuda:{base + world_size - 1}, but {count} cuda device(s) "
                                 "are visible")
            self.devices = [torch.device("cuda", base + r) for r in range(world_size)]
            self.backend = "nccl"
        elif device.type == "cpu":
            self.devices = [device] * world_size
            self.backend = "gloo"
        else:
            raise ValueError(f"data parallelism needs cuda or cpu devices, not {device.type}")
        self.world_size, self.micro_batch_size = world_size, micro_batch_size
        # the trainer's callback when it has one, so the lines keep the client's prefix
        self.log, self.warn = log or logger.info, log or logger.warning
        self.procs, self.conns, self.error = [], [], None
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore("127.0.0.1", 0, world_size, is_master=True,
                              wait_for_workers=False, timeout=timeout)
        ctx = torch.multiprocessing.get_context("spawn")
        threads = torch.get_num_threads() if self.backend == "gloo" else None
        try:
            for r in range(1, world_size):
                parent, child = ctx.Pipe()
                p = ctx.Process(target=_worker_main, name=f"psyche-dp-rank{r}", daemon=True,
                                args=(r, world_size, self.backend, store.port,
                                      str(self.devices[r]), model_spec, seed, micro_batch_size,
                                      timeout_s, threads, os.getpid(), child))
                p.start()
                child.close()
                self.procs.append(p)
                self.conns.append(parent)
            deadline = time.monotonic() + start_timeout_s
            for r in range(1, world_size):
                self._expect(r, "ready", deadline - time.monotonic())
            dist.init_process_group(self.backend, store=store, rank=0, world_size=world_size,
                                    timeout=timeout,
                                    **({"device_id": self.devices[0]}
                                       if self.backend == "nccl" else {}))
        except BaseException:
            self._kill()
            raise
        self.store = store
        self.log(f"data parallelism: {world_size} replicas ({self.backend}) on "
                 f"{', '.join(str(d) for d in self.devices)}, worker pids "
                 f"{', '.join(str(p.pid) for p in self.procs)}")

    # ----------------------------------------------------------- messaging
    def _expect(self, rank: int, kind: str, timeout: float):
        """The next message from worker ``rank``, which must be of ``kind``."""
        conn, proc = self.conns[rank - 1], self.procs[rank - 1]
        deadline = time.monotonic() + max(timeout, 0.0)
        while not conn.poll(0.2):
            if not proc.is_alive() and not conn.poll(0.2):
                raise self._fail(f"data-parallel rank {rank} exited with code {proc.exitcode}")
            if time.monotonic() > deadline:
                raise self._fail(f"data-parallel rank {rank}: no {kind!r} after {timeout:.0f} s")
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            raise self._fail(f"data-parallel rank {rank} closed its pipe "
                             f"(exit code {proc.exitcode})") from None
        if msg[0] == "error":
            raise self._fail(f"data-parallel worker failed:\n{msg[1]}")
        if msg[0] != kind:
            raise self._fail(f"data-parallel rank {rank}: expected {kind!r}, got {msg[0]!r}")
        return msg

    def _fail(self, message: str) -> RuntimeError:
        self.error = message
        return RuntimeError(message)

    def _send_all(self, cmds) -> None:
        """One command per worker (a list), or the same tuple to all."""
        if self.error:
            raise RuntimeError(f"the data-parallel group is broken: {self.error}")
        if isinstance(cmds, tuple):
            cmds = [cmds] * len(self.conns)
        for r, (conn, cmd) in enumerate(zip(self.conns, cmds), start=1):
            try:
                conn.send(cmd)
            except OSError as e:
                raise self._fail(f"data-parallel rank {r} is gone ({type(e).__name__}: {e}, "
                                 f"exit code {self.procs[r - 1].exitcode})") from None

    def _collective(self, fn, *args):
        """Run a collective; if it fails, report what the workers said."""
        try:
            return fn(*args)
        except Exception as e:
            details = []
            for conn in self.conns:
                try:
                    while conn.poll(0.5):
                        msg = conn.recv()
                        if msg[0] == "error":
                            details.append(msg[1])
                except (EOFError, OSError):
                    pass
            raise self._fail(f"{type(e).__name__}: {e}" +
                             "".join(f"\n{d}" for d in details)) from e

    # ----------------------------------------------------------- the trainer's calls
    def train(self, model, tokens: torch.Tensor) -> float:
        """Forward/backward of the whole batch across the group: leaves in rank 0's ``p.grad``
        the full batch's mean-loss gradient (summed over ranks) and returns the summed loss
        (divide by ``len(tokens)`` for the mean). Call with fresh gradients (zero_grad)."""
        n = len(tokens)
        b = share_bounds(n, self.world_size)
        cpu = tokens.detach().cpu().numpy()
        self._send_all([("train", np.ascontiguousarray(cpu[b[r]:b[r + 1]]), n)
                        for r in range(1, self.world_size)])
        own_error = None
        try:
            own = forward_backward(model, tokens[b[0]:b[1]], n, self.micro_batch_size)
        except Exception as e:  # still take part in the collectives, so the group stays usable
            own_error, own = e, 0.0
            model.zero_grad(set_to_none=True)
        self._collective(allreduce_grads, list(model.parameters()), self.backend)
        loss_sum, failed = self._collective(_allreduce_values, [own, 0.0], self.devices[0])
        # each failed worker sent its traceback before entering the collectives: read them all,
        # so the pipes hold nothing stale for the next command
        reports = [self._expect(r, "train_failed", 10.0)[1]
                   for r, conn in enumerate(self.conns, start=1) if failed and conn.poll(0.1)]
        if own_error is not None:
            for report in reports:
                self.warn(f"data parallelism: {report}")
            raise own_error
        if failed:
            raise RuntimeError(f"{int(failed)} data-parallel worker(s) failed this batch:\n"
                               + "\n".join(reports))
        return loss_sum

    def sync_params(self, model) -> None:
        """Make every replica equal to rank 0's model (after it applied a round)."""
        self._send_all(("sync",))
        self._collective(broadcast_params, list(model.parameters()), self.backend, 0)

    def request_hashes(self) -> None:
        self._send_all(("hash",))

    def collect_hashes(self, timeout: float = 600.0) -> list:
        """The parameter hashes of ranks 1..N-1, after ``request_hashes``."""
        return [self._expect(r, "hash", timeout)[1] for r in range(1, self.world_size)]

    def replica_hashes(self) -> list:
        self.request_hashes()
        return self.collect_hashes()

    @property
    def pids(self) -> list:
        return [p.pid for p in self.procs]

    def close(self, timeout: float = 30.0) -> None:
        """Stop the workers (cleanly when the group is healthy) and leave the process group."""
        if not self.procs:
            return
        if not self.error:
            try:
                self._send_all(("stop",))
            except (OSError, RuntimeError):
                pass
        deadline = time.monotonic() + timeout
        for p in self.procs:
            p.join(max(deadline - time.monotonic(), 0.1))
        self._kill()
        self.store = None
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception as e:  # a broken group may fail to tear down; the workers are gone
                self.warn(f"data parallelism: destroy_process_group: {type(e).__name__}: {e}")

    def _kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(5)
        for c in self.conns:
            c.close()
        self.procs, self.conns = [], []
