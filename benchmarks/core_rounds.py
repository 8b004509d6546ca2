"""Benchmark the pure coordinator core: many rounds with many clients.

A run with --clients clients (default 256) trains for --rounds rounds (default 1,000). Every round
the elected witnesses (32 at 256 clients) send realistic witnesses: participant blooms holding the
signer of every trainer of the previous round, broadcast blooms holding one commitment per
trainer. Every --health-every rounds one trainer is left out of a round's blooms and dropped by a
health check in the next round. Epochs end by epoch_time (about --epoch-rounds rounds), with the
2-round drain, cooldown, every client rejoining and warmup witnesses.

Measured: the time spent in `apply` per operation type (operations per second), the time of
`state_hash` on the state after every operation (hashes per second), and, separately, the
client-side work of building the blooms (not coordinator work).

    python benchmarks/core_rounds.py [--rounds 1000] [--clients 256]
"""

import argparse
import hashlib
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from psyche_coordinator_core import (  # noqa: E402
    ClientState,
    RoundCommittee,
    RunConfig,
    RunState,
    apply,
    assign_batches,
    bloom_of,
    new_run,
    state_hash,
)
from psyche_coordinator_core.bloom import EMPTY_BLOOM  # noqa: E402
from psyche_coordinator_core.shuffle import draw_first, drawn_set  # noqa: E402


def key(kind: str, i: int) -> bytes:
    return hashlib.sha256(f"bench/{kind}/{i}".encode()).digest()


class Bench:
    def __init__(self, clients: int, epoch_rounds: int, seed: int, keep_cache: bool = False):
        self.n = clients
        self.keep_cache = keep_cache
        self.cfg = RunConfig(
            warmup_time=30, cooldown_time=5, max_round_train_time=10, round_witness_time=1,
            epoch_time=2 * epoch_rounds, total_steps=10**6, max_seq_len=2048, min_clients=1,
            init_min_clients=clients, witness_nodes=0, global_batch_size_start=2 * clients,
            global_batch_size_end=2 * clients, waiting_for_members_extra_time=1).validate()
        self.state = new_run("bench", self.cfg, seed)
        self.now = 1_700_000_000
        self.op_time = defaultdict(float)
        self.op_count = defaultdict(int)
        self.hash_time = 0.0
        self.hash_count = 0
        self.bloom_time = 0.0
        self.rounds = 0
        self.epochs = 0
        self.dropped = 0
        self.signers = [key("signer", i) for i in range(clients)]
        self.p2p = [key("p2p", i) for i in range(clients)]

    # ------------------------------------------------------------------ measuring

    def op(self, op: str, label: str = None, **args):
        t0 = time.perf_counter()
        nxt = apply(self.state, self.now, op, **args)
        t1 = time.perf_counter()
        h = state_hash(nxt)
        t2 = time.perf_counter()
        label = label or op
        self.op_time[label] += t1 - t0
        self.op_count[label] += 1
        self.hash_time += t2 - t1
        self.hash_count += 1
        self.state = nxt
        return h

    def tick_at(self, when: int):
        self.now = max(self.now, when)
        self.op("tick")

    # ------------------------------------------------------------------ phases

    def start_epoch(self):
        s = self.state
        if s.run_state == RunState.Uninitialized:
            self.op("resume")
        for i in range(self.n):
            if self.state.pending_index(self.signers[i]) is None:
                self.op("join", signer=self.signers[i], p2p_identity=self.p2p[i])
        self.tick_at(self.state.run_state_start + self.cfg.waiting_for_members_extra_time)
        assert self.state.run_state == RunState.Warmup, self.state.run_state
        self.now += 1
        for i, c in enumerate(list(self.state.clients)):
            if self.state.run_state != RunState.Warmup:
                break
            self.op("warmup_witness", signer=c.signer, index=i)
        assert self.state.run_state == RunState.RoundTrain

    def blooms(self, missing):
        t0 = time.perf_counter()
        s = self.state
        prev = s.round_back(1)
        if prev is None or not s.round_trains(prev):
            out = EMPTY_BLOOM, EMPTY_BLOOM, bytes(32)
        else:
            batches = assign_batches(s.config, prev)
            trainers = [s.clients[i].signer for i in sorted(batches) if i not in missing]
            commits = [hashlib.sha256(b"commit" + t + s.step.to_bytes(4, "little")).digest()
                       for t in trainers]
            out = (bloom_of(t.hex() for t in trainers), bloom_of(c.hex() for c in commits),
                   hashlib.sha256(b"".join(commits)).digest())
        self.bloom_time += time.perf_counter() - t0
        return out

    def round(self, health_every: int, victim_state: dict):
        s = self.state
        cfg = self.cfg
        # a health check for the trainer left out of the previous round's blooms
        victim = victim_state.pop("check", None)
        if victim is not None and s.round_back(2) is not None:
            reporter = next(i for i, c in enumerate(s.clients)
                            if c.state == ClientState.Healthy and i != victim)
            self.now += 1
            self.op("health_check", signer=s.clients[reporter].signer, index=reporter,
                    targets=[victim])
            self.dropped += 1
            s = self.state
        missing = set()
        if health_every and self.rounds % health_every == health_every - 1:
            prev = s.round_back(1)
            if prev is not None and s.round_trains(prev) and s.last_step == 0:
                batches = assign_batches(cfg, prev)
                candidates = [i for i in sorted(batches)
                              if s.clients[i].state == ClientState.Healthy]
                if len(candidates) > 1:
                    victim = candidates[self.rounds % len(candidates)]
                    missing = {victim}
                    victim_state["check"] = victim
        t0 = time.perf_counter()
        elected = RoundCommittee(s.current_round, cfg.witness_nodes, 0).witness_indices()
        self.bloom_time += time.perf_counter() - t0
        pb, bb, merkle = self.blooms(missing)
        # The core caches shuffles (lru_cache). Forget what this driver just computed so the
        # coordinator pays for each round's committee itself, as a fresh process would.
        if not self.keep_cache:
            draw_first.cache_clear()
            drawn_set.cache_clear()
        self.now += 1
        step = s.step
        first = True
        for i in elected:
            c = self.state.clients[i]
            if c.state == ClientState.Healthy:
                self.op("witness", label="witness (first)" if first else "witness (rest)",
                        signer=c.signer, index=i, step=step, participant_bloom=pb,
                        broadcast_bloom=bb, broadcast_merkle=merkle)
                first = False
        if self.state.run_state == RunState.RoundTrain:  # an elected witness is gone
            self.tick_at(self.state.run_state_start + cfg.max_round_train_time)
        self.tick_at(self.state.run_state_start + cfg.round_witness_time)
        self.rounds += 1

    def run(self, rounds: int, health_every: int):
        victim_state = {}
        self.start_epoch()
        while self.rounds < rounds:
            st = self.state.run_state
            if st == RunState.RoundTrain:
                self.round(health_every, victim_state)
            elif st == RunState.Cooldown:
                victim_state.clear()
                self.now += 1
                for i in range(self.n):  # everyone rejoins for the next epoch
                    self.op("join", signer=self.signers[i], p2p_identity=self.p2p[i])
                self.tick_at(self.state.run_state_start + self.cfg.cooldown_time)
                self.epochs += 1
                assert self.state.run_state == RunState.WaitingForMembers
                self.start_epoch()
            else:
                raise RuntimeError(f"unexpected {st.name}")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.platform()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--epoch-rounds", type=int, default=100,
                    help="rounds per epoch, roughly (sets epoch_time)")
    ap.add_argument("--health-every", type=int, default=20,
                    help="drop one trainer by health check every N rounds (0: never)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--keep-cache", action="store_true",
                    help="let the core reuse the shuffles this driver computed first (a warm "
                    "server); by default the cache is cleared each round so the core pays for "
                    "every committee itself")
    args = ap.parse_args(argv)
    if not 1 <= args.clients <= 256:
        ap.error("--clients must be in [1, 256]")

    b = Bench(args.clients, args.epoch_rounds, args.seed, args.keep_cache)
    t0 = time.perf_counter()
    b.run(args.rounds, args.health_every)
    wall = time.perf_counter() - t0

    total_ops = sum(b.op_count.values())
    total_op_time = sum(b.op_time.values())
    print(f"core_rounds: {b.rounds} rounds, {args.clients} clients, {b.epochs + 1} epochs, "
          f"final step {b.state.step}, {b.dropped} dropped by health checks, shuffle cache "
          f"{'kept' if args.keep_cache else 'cleared each round'}")
    print(f"python {platform.python_version()} on {platform.machine()}, {cpu_model()}, "
          f"{os.cpu_count()} CPUs")
    print()
    print(f"{'operation':<16}{'count':>9}{'total s':>10}{'ops/s':>12}{'us/op':>10}")
    for op in sorted(b.op_count, key=lambda o: -b.op_time[o]):
        n, t = b.op_count[op], b.op_time[op]
        print(f"{op:<16}{n:>9}{t:>10.3f}{n / t:>12,.0f}{1e6 * t / n:>10.1f}")
    print(f"{'all ops':<16}{total_ops:>9}{total_op_time:>10.3f}"
          f"{total_ops / total_op_time:>12,.0f}{1e6 * total_op_time / total_ops:>10.1f}")
    print(f"{'state_hash':<16}{b.hash_count:>9}{b.hash_time:>10.3f}"
          f"{b.hash_count / b.hash_time:>12,.0f}{1e6 * b.hash_time / b.hash_count:>10.1f}")
    print()
    print(f"apply + hash per round: {1e3 * (total_op_time + b.hash_time) / b.rounds:.2f} ms; "
          f"rounds per second (core only): {b.rounds / (total_op_time + b.hash_time):,.1f}")
    print("driver work (committee, assign_batches, blooms; not counted above): "
          f"{b.bloom_time:.3f} s; total wall time {wall:.2f} s")


if __name__ == "__main__":
    main()
