"""Byzantine clients against a real in-process run: N clients (default 8) train a tiny Llama with
DisTrO, 2 of them adversarial, and the harness measures what the defenses keep out.

    . ~/.cache/psyche/venv/bin/activate
    python -m benchmarks.byzantine                          # every attack, one seed (~10 min)
    python -m benchmarks.byzantine --attacks scale100,nan   # a subset
    python -m benchmarks.byzantine --steps 20 --clients 6 --adversaries 1

Every run is the same run (same seed, data, model, config) with the real pieces in one process:
the coordinator core (`psyche_coordinator_core.apply`, simulated clock), a `ClientStateMachine`
and a `DistroTrainer` per client, and a synchronous shell in the daemon's place that delivers each
published result to every other client (sim.py). An adversary trains honestly and then publishes
what its attack makes of the payload, signed with its own key for its own batch (attacks.py).

Runs, in order: honest with the plain mean (clip and screen off) and honest with robust
aggregation (--clip, and the apply-time screen unless --no-screen): the cost of robust
aggregation, `robust_aggregation_honest_loss_ratio` = held-out loss robust / plain, averaged over
--seed and --extra-seeds (a pair per seed; one trajectory moves ~1 % between seeds); then one
run per attack with robust aggregation, and last the attack runs' honest clients alone (6 of 8:
the same config with --clients - --adversaries clients). Measured per attack:
  detection_rate           share of the attacked results (published by adversaries, changed by
                           the attack, outside a joiner's warm-up) that honest clients' applies
                           left out; lying_witness: its hashes never agreed; poisoned_snapshot:
                           loads of a poisoned recorded copy that did not end with its weights
  rounds_until_removed     steps from the first attacked step until every adversary's slot was
                           no longer Healthy (null: some adversary never was)
  honest_results_rejected  honest results missing from an honest client's applied set
  honest_clients_removed   honest clients whose slot stopped being Healthy
  heldout_loss_ratio       final held-out loss / the honest clients' run alone (the issue's
                           baseline); null when the run failed. Also against the run of all
                           8 honest (heldout_loss_ratio_vs_all_honest). With --loss-seeds,
                           the mean over the seeds of the ratio per seed (a 40-step trajectory
                           moves by about 1 % with any change), the other figures the worst
                           case over the seeds
  outcome                  "finished", or why it did not: an honest client's apply raising ends
                           the run (the daemon would log it and go on with a model the others
                           do not have), as does not finishing in time (stalled)
Writes benchmarks/results/byzantine.json (the `headline` object: plain numbers)."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.byzantine.attacks import ATTACKS  # noqa: E402
from benchmarks.byzantine.sim import RunFailed, Sim  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "byzantine.json"
DATA = Path.home() / ".cache" / "psyche" / "byzantine-data"
RUN_SEED = 1337


def make_data(root: Path) -> Path:
    """Token files of the standard library's docstrings, one token per byte (as the integration
    tests' data_dir): root/train and root/heldout (the last 5%). Built once."""
    from psyche_client.data.corpus import stdlib_docstrings
    from psyche_client.data.token_files import write_tokens
    from psyche_client.data.tokenizer import ByteTokenizer

    if (root / "heldout" / "tokens-000.bin").exists():
        return root
    ids = ByteTokenizer().encode(stdlib_docstrings(1 << 20))
    cut = int(len(ids) * 0.95)
    for name, part in (("train", ids[:cut]), ("heldout", ids[cut:])):
        (root / name).mkdir(parents=True, exist_ok=True)
        write_tokens(root / name / "tokens-000.bin", part, 2)
    return root


def make_run(args, data: Path, clip: float, screen: bool, store: str | None = None,
             clients: int | None = None):
    """The run's config and spec; with `store`, a snapshot store every client may write to,
    snapshots every 5 steps and room for one more client (a late joiner); `clients`: another
    number of clients than --clients (the honest clients alone)."""
    n = clients or args.clients
    from psyche_client.training.spec import RunSpec
    from psyche_coordinator_core import RunConfig

    config = RunConfig(
        max_clients=n + 1 if store else n,
        warmup_time=30, cooldown_time=2, max_round_train_time=30, round_witness_time=1,
        epoch_time=10 * args.steps + 1000, total_steps=args.steps, max_seq_len=args.seq_len,
        min_clients=2, init_min_clients=n, witness_nodes=0,
        global_batch_size_start=n * args.batch, global_batch_size_end=n * args.batch,
        waiting_for_members_extra_time=1, verification_percent=args.verification_percent,
        # strangers may join mid-epoch (a Sybil does): one syncing at a time, 2 warm-up rounds
        max_syncing=1, sync_warmup_rounds=2, kept_rounds=args.steps + 8,
        evidence_quorum=args.evidence_quorum, verify_sample=args.verify_sample,
        checkpoint_interval=5 if store else 0).validate()
    spec = RunSpec.from_dict({
        "model": dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                      intermediate_size=256, max_seq_len=args.seq_len),
        "optimizer": dict(kind="distro", lr=args.lr, warmup_steps=args.warmup, chunk=64,
                          topk=args.topk, quantize_1bit=False, clip=clip,
                          screen=screen, schedule=args.schedule),
        "data": dict(kind="local", dir=str(data / "train"), token_size=2,
                     shuffle_seed="5e" * 32, heldout_dir=str(data / "heldout"),
                     heldout_sequences=32),
        **({"checkpoint": {"store": store}} if store else {}),
    }, max_seq_len=args.seq_len)
    return config, spec


def one_run(args, data, clip, attack_name=None, screen=True, seed=None, clients=None) -> dict:
    cls = ATTACKS[attack_name] if attack_name else None
    if cls is not None and getattr(cls, "late_joiner", False):
        with tempfile.TemporaryDirectory(prefix="byzantine-store-") as store:
            return _one_run(args, data, clip, attack_name, screen, seed, store, clients)
    return _one_run(args, data, clip, attack_name, screen, seed, None, clients)


def _one_run(args, data, clip, attack_name, screen, seed, store, clients) -> dict:
    from psyche_client.training.model import parameter_hash

    config, spec = make_run(args, data, clip, screen, store, clients)
    adversaries = {}
    if attack_name:
        cls = ATTACKS[attack_name]
        # the last clients are the adversaries
        adversaries = {k: cls(seed=1000 + k)
                       for k in range(args.clients - args.adversaries, args.clients)}
    label = attack_name or (f"honest (clip {clip:g}, screen {'on' if screen else 'off'}"
                            + (f", seed {seed}" if seed is not None else "")
                            + (f", {clients} clients alone)" if clients else ")"))
    started = time.time()

    def progress(step, elapsed):
        if step % 10 == 0:
            print(f"  {label}: step {step}, {elapsed:.0f} s", flush=True)

    sim = None
    try:
        sim = Sim(config, spec, args.seed if seed is None else seed, adversaries,
                  log=lambda s: print(f"  {label}: {s}", flush=True),
                  late_joiner_at=args.steps // 2 if store else None)
        sim.run(max_seconds=40 * args.steps + 600, progress=progress)
        outcome = "finished"
    except RunFailed as e:
        outcome = str(e)
    except Exception as e:  # anything else the attack broke: recorded, next attack
        outcome = f"harness error: {type(e).__name__}: {str(e)[:200]}"
    row = summarize(sim, adversaries) if sim is not None else {}
    row.update(outcome=outcome, clip=clip, screen=screen,
               wall_s=round(time.time() - started, 1))
    if outcome != "finished":  # the last held-out loss taken is not the run's final one
        row["last_heldout_step"] = row.pop("final_heldout_step", None)
        row["last_heldout_loss"] = row.pop("final_heldout_loss", None)
        row["final_heldout_loss"] = None
    if sim is not None and outcome == "finished":
        honest = [c for c in sim.clients if c.attack is None]
        row["honest_params_agree"] = len({parameter_hash(c.trainer.model) for c in honest}) == 1
    print(f"  {label}: {outcome}; " + ", ".join(
        f"{k} {row.get(k)}" for k in ("final_heldout_loss", "detection_rate",
                                      "honest_results_rejected", "honest_clients_removed",
                                      "rounds_until_removed")) + f"; {row['wall_s']} s",
          flush=True)
    return row


def summarize(sim: Sim, adversaries: dict) -> dict:
    honest_idx = [c.index for c in sim.clients if c.attack is None]
    adv_keys = {c.identity.public for c in sim.clients if c.attack is not None}
    attacked = {}  # step -> [trainer keys] whose published payload the attack changed
    honest_pub = {}  # step -> [honest trainer keys]
    for (step, key), p in sim.published.items():
        if p.warming:  # a joiner's warm-up rounds: never applied, by design, not by a defense
            continue
        if p.attacked:
            attacked.setdefault(step, []).append(key)
        elif not p.adversary:
            honest_pub.setdefault(step, []).append(key)
    lies = set().union(*(getattr(a, "lies", set()) for a in adversaries.values()))
    asked = included = 0
    honest_missing = set()
    applied_steps = set()
    for who, step, trainers in sim.applies:
        if who not in honest_idx:
            continue
        applied_steps.add(step)
        got = set(trainers)
        for key in attacked.get(step, []):
            asked += 1
            included += key in got
        honest_missing |= {(step, k) for k in honest_pub.get(step, []) if k not in got}
    first_attack = min(attacked) if attacked else None
    removed = [c.removed_at for c in sim.clients if c.attack is not None]
    if first_attack is None or not removed or any(r is None for r in removed):
        rounds_removed = None
    else:
        rounds_removed = max(removed) - first_attack
    # the machines' own rejections on receipt (signature, assignment): dropped results
    dropped_adv = dropped_honest = 0
    for i in honest_idx:
        for key_hex, n in sim.clients[i].sm.rejected.items():
            if bytes.fromhex(key_hex) in adv_keys:
                dropped_adv += n
            else:
                dropped_honest += n
    # the snapshot attack: loads whose recorded copy was poisoned, and what they ended with
    poisoned_loads = [(who, used) for who, recorded, used, _ in sim.loads
                      if recorded in sim.poisoned]
    poisoned_accepted = sum(used in sim.poisoned for _, used in poisoned_loads)
    final = None
    for i in honest_idx:
        h = sim.heldout.get(i) or []
        if h and (final is None or h[-1][0] > final[0]):
            final = h[-1]
    if sim.poisoned:
        # kept out: a load of a poisoned recorded copy that did not end with its parameters
        detection = (round(1 - poisoned_accepted / len(poisoned_loads), 4) if poisoned_loads
                     else None)
    else:
        detection = (round(1 - included / asked, 4) if asked else
                     round(1 - len(lies & sim.agreed) / len(lies), 4) if lies else None)
    joiner = sim.late_joiner
    # the verifiers' verdicts on honest results and on attacked ones (scores: judge.py)
    judged = {"honest": [], "attacked": []}
    for step, key, z, bad in sim.verdicts:
        p = sim.published.get((step, key))
        if p is not None and not p.adversary:
            judged["honest"].append((z, bad))
        elif p is not None and p.attacked:
            judged["attacked"].append((z, bad))
    verdicts = {f"{k}_judged": len(v) for k, v in judged.items()}
    verdicts.update({f"{k}_judged_bad": sum(b for _, b in v) for k, v in judged.items()})
    # the lowest honest scores and the highest attacked ones, each score on its own
    for k, name in enumerate(("sign", "step")):
        on_honest = [z[k] for z, _ in judged["honest"]]
        on_attacked = [z[k] for z, _ in judged["attacked"]]
        verdicts[f"honest_min_{name}_score"] = round(min(on_honest), 2) if on_honest else None
        verdicts[f"attacked_max_{name}_score"] = (round(max(on_attacked), 2) if on_attacked
                                                  else None)
    return {
        "verdicts": verdicts,
        "adversaries": sorted(adversaries),
        "final_step": sim.state.step,
        "steps_applied": len(applied_steps),
        "attacked_results": sum(len(v) for v in attacked.values()),
        "attacked_results_in_honest_applies": included,
        # payload attacks: attacked results kept out of every honest apply; witness attacks:
        # lies kept out of the agreed parameter hashes; snapshot attacks: loads of a poisoned
        # recorded snapshot that did not end with its parameters
        "detection_rate": detection,
        "witness_lies": len(lies),
        "sybils": sim.sybils,
        "rounds_until_removed": rounds_removed,
        "adversaries_removed_at_step": removed,
        "honest_results_rejected": len(honest_missing),
        "honest_clients_removed": sum(sim.clients[i].removed_at is not None for i in honest_idx),
        "dropped_on_receipt_adversarial": dropped_adv,
        "dropped_on_receipt_honest": dropped_honest,
        "adversary_apply_failures": len(sim.adversary_failures),
        "poisoned_snapshots_stored": len(sim.poisoned),
        "poisoned_snapshots_recorded": len(sim.poisoned & sim.recorded),
        "base_loads": len(sim.loads),
        "poisoned_base_loads": len(poisoned_loads),
        "poisoned_base_loads_accepted": poisoned_accepted,
        "base_loads_failed": sum(used is None for _, _, used, _ in sim.loads),
        "late_joiner": joiner.index if joiner else None,
        "late_joiner_trained_steps": (sum(1 for p in sim.published.values()
                                          if p.client == joiner.index) if joiner else None),
        "final_heldout_step": final[0] if final else None,
        "final_heldout_loss": round(final[1], 5) if final else None,
        "initial_heldout_loss": round(sim.heldout[honest_idx[0]][0][1], 5)
        if sim.heldout.get(honest_idx[0]) else None,
    }


UPDATE_FREE = {"attacks", "update", "out", "data_dir"}  # settings an --update may change


def _loss_ratio(row: dict, alone, everyone) -> None:
    loss = row.get("final_heldout_loss") if row.get("outcome") == "finished" else None
    row["heldout_loss_ratio"] = round(loss / alone, 4) if loss and alone else None
    row["heldout_loss_ratio_vs_all_honest"] = (round(loss / everyone, 4)
                                               if loss and everyone else None)


def _mean_ratio(row: dict, seed: int, baseline: dict):
    """The mean over the seeds of the row's final held-out loss over `baseline[seed]` (the
    row's own run is `seed`'s, its per_seed rows the others'); None if any is missing."""
    losses = {str(seed): row.get("final_heldout_loss"),
              **{s: r.get("final_heldout_loss") for s, r in (row.get("per_seed") or {}).items()}}
    pairs = [(losses.get(s), b) for s, b in baseline.items()]
    if any(not a or not b for a, b in pairs):
        return None
    return round(sum(a / b for a, b in pairs) / len(pairs), 4)


def _over_seeds(row: dict, more: dict) -> None:
    """Fold the attack's runs on more seeds ({seed: (row, the honest clients alone's loss)})
    into its row, whose own figures are --seed's: one 40-step trajectory moves by about 1 %
    between seeds (and between runs that differ in any result), so the loss ratio is the mean
    over the seeds; the rest takes the worst case (lowest detection rate, sums of the honest
    results rejected and clients removed)."""
    if "seeds" in row:  # folded before (an --update): start again from --seed's own figures
        for k in ("detection_rate", "honest_results_rejected", "honest_clients_removed"):
            row[k] = row[f"seed_{k}"]
    for r, alone in more.values():
        _loss_ratio(r, alone, None)
    runs = [row] + [r for r, _ in more.values()]
    ratios = [r["heldout_loss_ratio"] for r in runs]
    row["seed_heldout_loss_ratio"] = row["heldout_loss_ratio"]
    row["heldout_loss_ratio"] = (round(sum(ratios) / len(ratios), 4)
                                 if None not in ratios else None)
    row["heldout_loss_ratio_worst_seed"] = max(ratios) if None not in ratios else None
    rates = [r.get("detection_rate") for r in runs if r.get("detection_rate") is not None]
    row["seed_detection_rate"] = row.get("detection_rate")
    row["detection_rate"] = min(rates) if rates else None
    for k in ("honest_results_rejected", "honest_clients_removed"):
        row[f"seed_{k}"] = row.get(k, 0)
        row[k] = sum(r.get(k, 0) for r in runs)
    if any(r.get("outcome") != "finished" for r in runs):
        row["outcome"] = next(f"seed {s}: {r.get('outcome')}" for s, (r, _) in
                              {"main": (row, None), **more}.items()
                              if r.get("outcome") != "finished")
    row["seeds"] = 1 + len(more)


def _settings(args) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
            if k != "update"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.byzantine",
        description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 3)[3],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attacks", default=",".join(ATTACKS),
                    help=f"comma-separated subset of: {', '.join(ATTACKS)}; '' or 'none' runs "
                         "only the honest baselines (default: all)")
    ap.add_argument("--steps", type=int, default=40, help="training steps (default 40)")
    ap.add_argument("--clients", type=int, default=8, help="clients in the run (default 8)")
    ap.add_argument("--adversaries", type=int, default=2,
                    help="adversarial clients (the last ones) in each attack run (default 2)")
    ap.add_argument("--clip", type=float, default=None,
                    help="optimizer.clip of the attack runs and the clipped honest run "
                         "(default: the run spec's default, or 3 when that is 0)")
    ap.add_argument("--no-screen", action="store_true",
                    help="turn the apply-time screen (optimizer.screen) off in the attack runs "
                         "and the robust honest run (default: on)")
    ap.add_argument("--verification-percent", type=int, default=25,
                    help="share of each round's clients elected to verify (default 25: 2 of 8)")
    ap.add_argument("--evidence-quorum", type=int, default=3,
                    help="distinct verifiers whose evidence evicts a client (default 3: more "
                         "than the 2 adversaries, so they cannot evict an honest client)")
    ap.add_argument("--verify-sample", type=int, default=6,
                    help="results each verifier judges a round (default 6: both verifiers of 8 "
                         "clients judge all 6 trainers' results, so an adversary verifier cannot "
                         "keep its partner's result from the honest one; 0: the run default, 3)")
    ap.add_argument("--batch", type=int, default=4, help="sequences per client per step")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=5, help="optimizer warmup steps")
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                    help="lr after warmup (default cosine to 0.1 x lr at the last step, DeMo's "
                         "recipe: at a constant lr the sign steps leave the final loss "
                         "oscillating, ~1.7 %% between seeds for 8 honest clients against 6, "
                         "against ~0.3 %% with cosine)")
    ap.add_argument("--topk", type=int, default=32)
    ap.add_argument("--seed", type=int, default=RUN_SEED,
                    help=f"the run seed (initial weights; default {RUN_SEED})")
    ap.add_argument("--extra-seeds", type=lambda v: [int(x) for x in v.split(",") if x],
                    default=[7, 42],
                    help="more run seeds for the honest plain/robust pair (the cost of robust "
                         "aggregation is averaged over these and --seed; default 7,42; '' for "
                         "none)")
    ap.add_argument("--loss-seeds", type=lambda v: [int(x) for x in v.split(",") if x],
                    default=[],
                    help="more run seeds for every attack and for the honest clients alone: an "
                         "attack's heldout_loss_ratio is then the mean of its ratios per seed "
                         "(each against the honest clients alone on that seed), its detection "
                         "rate the worst seed's, its honest results rejected and clients removed "
                         "the sums over the seeds (default: none, --seed only)")
    ap.add_argument("--data-dir", type=Path, default=DATA,
                    help=f"token files, built here once (default {DATA})")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the plain-mean honest run (no robust_aggregation ratio)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--update", action="store_true",
                    help="run only --attacks and merge their rows into --out, keeping its "
                         "baselines and other rows (its settings must be these)")
    args = ap.parse_args(argv)
    names = [a for a in args.attacks.split(",") if a and a != "none"]
    unknown = [a for a in names if a not in ATTACKS]
    if unknown:
        ap.error(f"unknown attack {unknown[0]!r} (known: {', '.join(ATTACKS)})")
    if not 1 <= args.adversaries < args.clients:
        ap.error("--adversaries must be between 1 and --clients - 1")

    import torch

    from psyche_client.training.spec import OptimizerSpec

    torch.set_num_threads(1)
    clip = args.clip if args.clip is not None else (OptimizerSpec().clip or 3.0)
    started = time.time()
    data = make_data(args.data_dir)
    print(f"byzantine: {args.clients} clients, {args.steps} steps, clip {clip:g}, attacks: "
          f"{', '.join(names) or 'none'}", flush=True)
    honest, attacks, cost, earlier_s = {}, {}, {}, 0.0
    if args.update:  # the baselines and the other attacks' rows of an earlier run, same settings
        doc = json.loads(args.out.read_text())
        mine = _settings(args)
        diff = [k for k in mine if k not in UPDATE_FREE and doc["settings"].get(k) != mine[k]]
        if diff:
            ap.error(f"--update: {args.out} was measured with other settings ({', '.join(diff)})")
        honest, attacks = doc["honest"], doc["attack_runs"]
        cost = {int(k): v for k, v in doc["robust_aggregation_cost_per_seed"].items()}
        earlier_s = doc["headline"]["wall_s"]
    else:
        if not args.no_baseline:
            honest["plain"] = one_run(args, data, 0.0, screen=False)
        honest["robust"] = one_run(args, data, clip, screen=not args.no_screen)
    for name in names:
        print(f"attack {name}: clients {args.clients - args.adversaries}..{args.clients - 1} "
              "adversarial", flush=True)
        attacks[name] = one_run(args, data, clip, name, screen=not args.no_screen)
        attacks[name]["per_seed"] = {
            str(seed): one_run(args, data, clip, name, screen=not args.no_screen, seed=seed)
            for seed in args.loss_seeds}
    # the baseline: the honest clients of an attack run alone, on every seed
    for seed in [None, *args.loss_seeds]:
        key = "alone" if seed is None else f"alone_seed_{seed}"
        if key not in honest:
            honest[key] = one_run(args, data, clip, screen=not args.no_screen, seed=seed,
                                  clients=args.clients - args.adversaries)
    everyone = honest["robust"].get("final_heldout_loss")
    for row in attacks.values():
        _loss_ratio(row, honest["alone"].get("final_heldout_loss"), everyone)
        if row.get("per_seed"):
            _over_seeds(row, {seed: (r, honest[f"alone_seed_{seed}"].get("final_heldout_loss"))
                              for seed, r in row["per_seed"].items()})
    off, on = honest.get("plain", {}), honest["robust"]
    # the cost of robust aggregation, per run seed: one 40-step trajectory moves by about 1 %
    # between seeds, so the headline is the mean over the seeds
    if off.get("final_heldout_loss") and on.get("final_heldout_loss"):
        cost[args.seed] = on["final_heldout_loss"] / off["final_heldout_loss"]
    for seed in ([] if args.no_baseline or args.update else args.extra_seeds):
        pair = {"plain": one_run(args, data, 0.0, screen=False, seed=seed),
                "robust": one_run(args, data, clip, screen=not args.no_screen, seed=seed)}
        honest[f"seed_{seed}"] = pair
        a, b = (pair[k].get("final_heldout_loss") for k in ("plain", "robust"))
        if a and b:
            cost[seed] = b / a
    ratios = [r["heldout_loss_ratio"] for r in attacks.values()
              if r["heldout_loss_ratio"] is not None]
    # the same against the run of all 8 honest clients, per seed: what the defenses leave of an
    # attack, apart from the 2 clients it takes away (the 8 honest and the 6 alone differ too)
    all_honest = {str(args.seed): honest["robust"].get("final_heldout_loss"),
                  **{str(s): honest.get(f"seed_{s}", {}).get("robust", {}).get(
                      "final_heldout_loss") for s in args.loss_seeds}}
    alone_of = {str(args.seed): honest["alone"].get("final_heldout_loss"),
                **{str(s): honest[f"alone_seed_{s}"].get("final_heldout_loss")
                   for s in args.loss_seeds}}
    vs_all = [_mean_ratio(r, args.seed, all_honest) for r in attacks.values()]
    vs_all = [v for v in vs_all if v is not None]
    honest_vs_alone = (round(sum(all_honest[k] / alone_of[k] for k in all_honest)
                             / len(all_honest), 4)
                       if all(all_honest.values()) and all(alone_of.values()) else None)
    # the attacks; an extra one (overlap_noise) has its own figure
    rates = [r["detection_rate"] for name, r in attacks.items()
             if r.get("detection_rate") is not None
             and not getattr(ATTACKS.get(name), "extra", False)]
    headline = {
        "min_detection_rate": min(rates) if rates else None,
        **{f"{name}_detection_rate": r.get("detection_rate") for name, r in attacks.items()
           if getattr(ATTACKS.get(name), "extra", False)},
        "honest_clients_removed": sum(r.get("honest_clients_removed", 0) for r in attacks.values()),
        "honest_results_rejected": sum(r.get("honest_results_rejected", 0)
                                       for r in attacks.values()),
        "max_heldout_loss_ratio": max(ratios) if ratios else None,
        # run seeds per attack: with more than one, each attack's ratio is its mean over them
        "loss_seeds": 1 + len(args.loss_seeds),
        "max_heldout_loss_ratio_vs_all_honest": max(vs_all) if vs_all else None,
        # no adversary at all: the 8 honest clients against the 6 alone, mean over the seeds
        "all_honest_vs_alone_loss_ratio": honest_vs_alone,
        # the verifiers' verdicts over every attack run (training/judge.py)
        **{f"verifier_{k}": sum((r.get("verdicts") or {}).get(k, 0) for r in attacks.values())
           for k in ("honest_judged", "honest_judged_bad", "attacked_judged",
                     "attacked_judged_bad")},
        "attacks_run": len(attacks),
        "attacks_failed_run": sum(r["outcome"] != "finished" for r in attacks.values()),
        "robust_aggregation_honest_loss_ratio": (round(sum(cost.values()) / len(cost), 4)
                                                 if cost else None),
        "robust_aggregation_honest_loss_ratio_worst_seed": (round(max(cost.values()), 4)
                                                            if cost else None),
        "robust_aggregation_seeds": len(cost),
        "honest_heldout_loss_plain": off.get("final_heldout_loss"),
        "honest_heldout_loss_robust": on.get("final_heldout_loss"),
        "honest_alone_heldout_loss": honest["alone"].get("final_heldout_loss"),
        "initial_heldout_loss": on.get("initial_heldout_loss"),
        "clip": clip,
        "screen": not args.no_screen,
        "wall_s": round(earlier_s + time.time() - started, 1),
    }
    table = {name: {k: r.get(k) for k in (
        "outcome", "detection_rate", "rounds_until_removed", "honest_results_rejected",
        "honest_clients_removed", "heldout_loss_ratio", "heldout_loss_ratio_worst_seed", "seeds",
        "final_heldout_loss", "wall_s")}
        for name, r in attacks.items()}
    doc = {"headline": headline, "attacks": table,
           "robust_aggregation_cost_per_seed": {str(k): round(v, 4) for k, v in cost.items()},
           "settings": {**_settings(args), "attacks": ",".join(attacks)},
           "honest": honest, "attack_runs": attacks,
           "machine": {"python": platform.python_version(), "platform": platform.platform(),
                       "torch_threads": 1}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(headline, indent=1))
    for name, r in table.items():
        print(f"{name:10} {r['outcome'][:70]:70} detect {r['detection_rate']} "
              f"loss ratio {r['heldout_loss_ratio']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
