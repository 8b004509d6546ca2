"""How long a client that joins a live run waits before its work counts: rounds and seconds from
its join to the first round whose applied results include one of its own, with the join flow of
seed 002 (mid-epoch join, queue, sync, warm-up) against the old behaviour (every join waits for
the next epoch), in the same run of this script.

    . ~/.cache/psyche/venv/bin/activate
    python benchmarks/late_join.py                 # config/llama-local as it is, 12 joins
    python benchmarks/late_join.py --joins 24 --download-s 5

The run: config/llama-local/state.toml's [config] exactly as checked in (60 s epochs, 3
incumbent clients; its join settings: max_syncing, sync_warmup_rounds = K, kept_rounds); the
baseline is the same config with max_syncing = 0. Each join is its own simulated run: the three
incumbents start it, and one newcomer joins at an offset into the first epoch's training; the
offsets are spread evenly over that epoch (k * epoch_time / joins). (The first epoch, because
with 1 s rounds llama-local's 120 steps end in the second: a newcomer of the last epoch never
trains under the old behaviour.)

What runs: the real coordinator core (`psyche_coordinator_core.apply`) and one real
`ClientStateMachine` per client, in one process, on a simulated clock of whole seconds (the core
counts time in seconds). A simulated daemon carries out the machines' actions with modelled
costs instead of a model: training takes --train-s (0 gives the 1 s rounds of llama-local's
round_witness_time), loading the model at an epoch's Warmup --load-s, downloading the stale
snapshot --download-s, replaying one round's applied results --replay-s (fetched from a peer
that applied it); results reach every peer at once; parameter hashes are those an honest run
has (the same function of the step for everyone). The server ticks every second, as the
centralized server does at deadlines.

Measured per join: the step and time of the join (the join operation accepted), and of the
first apply, by an incumbent, of a result set that holds a result of the newcomer. Rounds are
steps between the two; the medians over the joins are the headline. Writes
benchmarks/results/late_join.json.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import platform
import statistics
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from psyche_client.client import actions as A  # noqa: E402
from psyche_client.client.results import TrainingResult, dummy_payload  # noqa: E402
from psyche_client.client.state_machine import ClientStateMachine  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_coordinator_core import (  # noqa: E402
    CoordinatorError,
    RunConfig,
    RunState,
    apply,
    new_run,
)

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "config/llama-local/state.toml"
RESULTS = Path(__file__).resolve().parent / "results" / "late_join.json"
T0 = 1_000_000


def honest_params(step: int) -> bytes:
    """The parameter hash every honest client holds when it trains `step`."""
    return hashlib.sha256(b"late-join/params/%d" % step).digest()


class SimRun:
    """One run: the core, the clients' state machines, and a daemon with modelled costs."""

    def __init__(self, config: RunConfig, run_seed: int, costs: dict, incumbents: int = 3):
        self.config, self.costs = config, costs
        self.t = T0
        self.state = apply(new_run("late-join", config, run_seed), self.t, "resume")
        self.ids, self.sms = [], []
        self.events = []  # (time, seq, client, callable returning actions)
        self.seq = 0
        self.applied_with = {}  # client -> [(time, step_now, step applied)] containing its result
        self.bases = {}  # client -> (step, params) of the base it downloaded
        for _ in range(incumbents):
            self.add_client()

    def add_client(self) -> int:
        k = len(self.ids)
        ident = Identity(hashlib.sha256(b"late-join/client/%d" % k).digest())
        self.ids.append(ident)
        self.sms.append(ClientStateMachine(ident.public, ident.public))
        self._do(k, self.sms[k].on_state(self.state, self.t))
        return k

    # ------------------------------------------------------------------ the daemon
    def later(self, seconds: float, who: int, fn) -> list:
        """Run `fn` (which returns actions) after `seconds`: now when that rounds to 0."""
        delay = max(0, round(seconds))
        if delay == 0:
            return fn()
        self.seq += 1
        heapq.heappush(self.events, (self.t + delay, self.seq, who, fn))
        return []

    def _send(self, who, op, args) -> list:
        sm = self.sms[who]
        try:
            nxt = apply(self.state, self.t, op, **args)
        except CoordinatorError as e:
            return sm.op_finished(op, e.code, args)
        self._set_state(nxt)
        return sm.op_finished(op, None, args)

    def _set_state(self, nxt) -> None:
        changed = nxt is not self.state
        self.state = nxt
        if changed:
            for k, sm in enumerate(self.sms):
                self._do(k, sm.on_state(self.state, self.t))

    def _do(self, who: int, actions: list) -> None:
        queue = [(who, a) for a in actions]
        while queue:
            who, act = queue.pop(0)
            sm = self.sms[who]
            more = self.carry_out(who, sm, act)
            queue += [(who, a) for a in more or []]

    def carry_out(self, who, sm, act) -> list:
        c = self.costs
        match act:
            case A.Send(op, args):
                return self._send(who, op, args)
            case A.Prepare(epoch):
                step = self.state.step
                return self.later(c["load_s"], who,
                                  lambda: sm.model_ready(epoch, honest_params(step)))
            case A.Apply(step, results):
                self._note_apply(who, step, results)
                return sm.applied_params(step, honest_params(step + 2))
            case A.Train(step, batch):
                result = TrainingResult.create(self.ids[who], step, batch,
                                               dummy_payload("late-join", step, batch))
                return self.later(c["train_s"], who, lambda: sm.trained(step, result))
            case A.Publish(result):
                for k, other in enumerate(self.sms):
                    if k != who:
                        self._do(k, other.on_result(result))
            case _:
                return self.carry_out_sync(who, sm, act)
        return []

    def carry_out_sync(self, who, sm, act) -> list:
        """The join flow's actions (download, replay), and the ones with nothing to simulate."""
        c = self.costs
        match act:
            case A.LoadBase():
                ck = self.state.checkpoint
                base = (ck.step, ck.hash) if any(ck.hash) else (1, honest_params(1))
                self.bases[who] = base
                return self.later(c["download_s"], who, lambda: sm.base_ready(*base))
            case A.ResetToBase():
                return sm.base_ready(*self.bases[who])
            case A.FetchApplied(step, exclude):
                got, peer = self.fetch(who, step, exclude)
                return self.later(c["replay_s"], who, lambda: sm.fetched(step, got, peer))
            case A.FetchResults(step):  # a first round as a participant: the round before it
                acts = []
                for k, other in enumerate(self.sms):
                    if k != who:
                        for r in other.received_results(step):
                            acts += sm.on_result(r)
                return acts
        return []

    def fetch(self, who, step, exclude):
        """An applied set of `step` from a peer that trains (Active or WarmingUp)."""
        for k, other in enumerate(self.sms):
            i = self.state.client_index(self.ids[k].public)
            if k == who or str(k) in exclude or i is None or not self.state.clients[i].trains:
                continue
            got = other.kept_set(step)
            if got is not None:
                return got, str(k)
        return None, None

    def _note_apply(self, who, step, results) -> None:
        if who >= 3:
            return  # an incumbent's apply is the run's
        for r in results:
            k = next(i for i, ident in enumerate(self.ids) if ident.public == r.trainer)
            self.applied_with.setdefault(k, []).append((self.t, self.state.step, step))

    # ------------------------------------------------------------------ the clock
    def advance(self) -> None:
        """One second: due events, then the server's tick, then every client's timer."""
        self.t += 1
        while self.events and self.events[0][0] <= self.t:
            _, _, who, fn = heapq.heappop(self.events)
            self._do(who, fn())
        try:
            self._set_state(apply(self.state, self.t, "tick"))
        except CoordinatorError:
            pass
        for k, sm in enumerate(self.sms):
            self._do(k, sm.on_timer(self.t))

    def run_until(self, predicate, limit: int = 10_000) -> None:
        for _ in range(limit):
            if predicate():
                return
            if self.state.run_state == RunState.Finished:
                raise RuntimeError("the run finished first")
            self.advance()
        raise RuntimeError("simulation limit reached")


def one_join(config: RunConfig, offset: int, costs: dict, seed: int) -> dict:
    """Three incumbents, a newcomer `offset` seconds into the first epoch's training."""
    sim = SimRun(config, seed, costs)
    sim.run_until(lambda: sim.state.run_state in (RunState.RoundTrain, RunState.RoundWitness))
    epoch_start = sim.state.epoch_start_timestamp
    sim.run_until(lambda: sim.t >= epoch_start + offset)
    me = sim.add_client()
    sim.run_until(lambda: sim.state.pending_index(sim.ids[me].public) is not None
                  or sim.state.client_index(sim.ids[me].public) is not None)
    joined_t, joined_step = sim.t, sim.state.step
    try:
        sim.run_until(lambda: me in sim.applied_with)
    except RuntimeError as e:
        return {"offset_s": offset, "join_step": joined_step, "error": str(e)}
    t, step_now, step = sim.applied_with[me][0]
    return {"offset_s": offset, "join_step": joined_step, "join_phase": None,
            "first_applied_step": step, "applied_at_step": step_now,
            "rounds": step_now - joined_step, "seconds": t - joined_t}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--joins", type=int, default=12, help="joins spread over one epoch")
    ap.add_argument("--train-s", type=float, default=0)
    ap.add_argument("--load-s", type=float, default=2)
    ap.add_argument("--download-s", type=float, default=2)
    ap.add_argument("--replay-s", type=float, default=0.02, help="per replayed round")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    spec = tomllib.loads(SPEC.read_text())
    config = RunConfig.from_dict(spec["config"])
    costs = {"train_s": args.train_s, "load_s": args.load_s, "download_s": args.download_s,
             "replay_s": args.replay_s}
    offsets = [k * config.epoch_time // args.joins for k in range(args.joins)]
    modes = {"join flow": config, "old behaviour": replace(config, max_syncing=0)}
    out = {}
    for name, cfg in modes.items():
        rows = []
        for off in offsets:
            row = one_join(cfg, off, costs, spec["run_seed"])
            rows.append(row)
            print(f"{name:14} join at +{off:2d} s (step {row['join_step']:3d}): "
                  + (f"{row['rounds']:3d} rounds, {row['seconds']:4d} s"
                     if "rounds" in row else row["error"]), flush=True)
        done = [r for r in rows if "rounds" in r]
        out[name] = {"joins": rows, "never_applied": len(rows) - len(done),
                     "median_rounds": statistics.median(r["rounds"] for r in done),
                     "median_seconds": statistics.median(r["seconds"] for r in done),
                     "mean_rounds": statistics.mean(r["rounds"] for r in done),
                     "max_rounds": max(r["rounds"] for r in done)}
    new, old = out["join flow"], out["old behaviour"]
    headline = {
        "median_rounds_to_first_applied": new["median_rounds"],
        "baseline_median_rounds_to_first_applied": old["median_rounds"],
        "warmup_rounds": config.sync_warmup_rounds,
        "median_seconds_to_first_applied": new["median_seconds"],
        "baseline_median_seconds_to_first_applied": old["median_seconds"],
        "rounds_ratio": round(old["median_rounds"] / new["median_rounds"], 2),
    }
    doc = {"headline": headline, "config": config.to_dict(), "costs": costs,
           "offsets_s": offsets, "modes": out,
           "machine": {"python": platform.python_version(), "platform": platform.platform()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(headline, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
