"""DisTrO against data-parallel AdamW: same model, same initial weights, same data, same tokens.

N simulated clients each train on their own shard of every step's batch.
- AdamW (data parallel): the clients' gradients are averaged every step (what an all-reduce of
  dense bf16 gradients gives), then one AdamW step. Bytes per client per step: 2 * parameters.
- DisTrO: each client compresses its momentum (top-k of a chunked DCT, 1-bit values) into a
  payload; every client applies all payloads of a step as the run does: round h's results are
  applied while round h+2 trains (so training never sees the previous round's update; with
  --lookahead each client adds its own in-flight update, as Psyche's error_correction).
  Bytes per client per step: the encoded payload it sends.
Both take the same learning-rate schedule; with several --adam-lr / --distro-lr each is tuned
over its grid and the best final loss is compared. Reports held-out loss of each, the final loss
ratio, and the byte ratio. Not a test.

    python benchmarks/distro_vs_adamw.py --steps 200 --topk 32 4 --rice
    python benchmarks/distro_vs_adamw.py --steps 1000 --schedule cosine --hidden 256 \
        --adam-lr 1e-3 3e-3 --distro-lr 1e-3 3e-3 --topk 4 --rice --lookahead
"""

import argparse
import math
import time

import numpy as np
import torch

from psyche_client.data.local import LocalDataProvider
from psyche_client.training.distro import DistroOptimizer, PeerResult
from psyche_client.training.model import build_model, parameter_count
from psyche_client.training.payload import decode_payload, encode_payload, result_key
from psyche_client.training.spec import ModelSpec
from psyche_coordinator_core import BatchId


def heldout_loss(model, tokens):
    model.eval()
    with torch.no_grad():
        return sum(model(input_ids=t, labels=t).loss.item() for t in tokens.split(8)) / len(
            tokens.split(8))


def batches(train, step, clients, per_client):
    base = (step - 1) * clients * per_client
    return [torch.from_numpy(train.get_samples(base + c * per_client,
                                               base + (c + 1) * per_client - 1))
            for c in range(clients)]


def lr_at(args, lr, step):
    """Linear warmup, then constant or cosine decay to ``final_frac * lr`` at the last step
    (DeMo's recipe: cosine, alpha_f 0.1)."""
    if args.warmup and step < args.warmup:
        return lr * step / args.warmup
    if args.schedule == "constant":
        return lr
    t = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return lr * (args.final_frac + (1 - args.final_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def run_adamw(args, spec, train, heldout, lr):
    model = build_model(spec, args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95),
                            weight_decay=args.adam_weight_decay)
    t0 = time.time()
    for step in range(1, args.steps + 1):
        model.train()
        grads = []
        for x in batches(train, step, args.clients, args.per_client):
            model.zero_grad(set_to_none=True)
            model(input_ids=x, labels=x).loss.backward()
            grads.append([p.grad.to(torch.bfloat16) for p in model.parameters()])
        for i, p in enumerate(model.parameters()):  # the all-reduce: mean of bf16 gradients
            p.grad = torch.stack([g[i].float() for g in grads]).mean(0)
        if args.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(args, lr, step)
        opt.step()
    return heldout_loss(model, heldout), 2 * parameter_count(model), time.time() - t0


def run_distro(args, spec, train, heldout, topk, lr):
    models = [build_model(spec, args.seed) for _ in range(args.clients)]
    opts = [DistroOptimizer(m.parameters(), lr=lr, topk=topk, chunk=args.chunk,
                            quantize_1bit=not args.no_1bit, lookahead=args.lookahead,
                            momentum_decay=args.momentum_decay, max_grad_norm=args.clip)
            for m in models]
    late = 1 + args.delay  # results of step s are applied before step s + late trains
    pending, sizes, t0 = {}, [], time.time()
    for step in range(1, args.steps + late + 1):
        if step - late in pending:  # everyone applies the same set of payloads
            results = pending.pop(step - late)
            for o in opts:  # compress_step took any lookahead back
                o.apply_results(results, lr_at(args, lr, step - late))
        if step > args.steps:
            continue  # drain: apply what is still in flight, as the epoch's last rounds do
        results = []
        for c, (m, o, x) in enumerate(zip(models, opts, batches(train, step, args.clients,
                                                                    args.per_client))):
            if args.lookahead and step > 1:  # own in-flight update, as Psyche's error_correction
                o.apply_lookahead(lr_at(args, lr, step - 1))
            m.train()
            m.zero_grad(set_to_none=True)
            m(input_ids=x, labels=x).loss.backward()
            payload = encode_payload(o.compress_step(lr_at(args, lr, step)), rice=args.rice)
            sizes.append(len(payload))
            key = result_key(step, BatchId(c, c), bytes([c]) * 32)  # canonical order by client
            results.append(PeerResult(key, tuple(decode_payload(payload, layout=o.layout()))))
        pending[step] = results
    return heldout_loss(models[0], heldout), float(np.mean(sizes)), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default="config/llama-local/data", help="tokenize output dir "
                    "(train/, heldout/); one token per byte with vocab 256")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--per-client", type=int, default=8, help="sequences per client per step")
    ap.add_argument("--topk", type=int, nargs="+", default=[32, 4])
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--no-1bit", action="store_true", help="send values in the param dtype")
    ap.add_argument("--delay", type=int, default=1,
                    help="rounds a result waits before it is applied: 1 as the run (round h is "
                    "applied while round h+2 trains), 0 applies it before the next step")
    ap.add_argument("--momentum-decay", type=float, default=0.999, help="DisTrO's beta")
    ap.add_argument("--clip", type=float, default=None,
                    help="clip gradient norms (DeMo's recipe: 1.0): AdamW's averaged gradient, "
                    "each DisTrO client's own")
    ap.add_argument("--lookahead", action="store_true",
                    help="each client trains on its own in-flight update (Psyche's "
                    "error_correction) to offset the delay")
    ap.add_argument("--distro-lr", type=float, nargs="+", default=[3e-3],
                    help="one or more peak learning rates; the best final loss is reported")
    ap.add_argument("--adam-lr", type=float, nargs="+", default=[3e-3],
                    help="one or more peak learning rates; the best final loss is reported")
    ap.add_argument("--adam-weight-decay", type=float, default=0.0)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--schedule", choices=["constant", "cosine"], default="constant",
                    help="after warmup: constant, or cosine decay to --final-frac of the peak")
    ap.add_argument("--final-frac", type=float, default=0.1)
    ap.add_argument("--hidden", type=int, default=128, help="model width (heads of 32)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rice", action="store_true", help="entropy-coded indices")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = ModelSpec(vocab_size=256, hidden_size=args.hidden, num_layers=args.layers,
                     num_heads=args.hidden // 32, num_kv_heads=args.hidden // 32,
                     intermediate_size=4 * args.hidden).validate()
    train = LocalDataProvider(f"{args.data}/train", 2, spec.max_seq_len, bytes([7]) * 32)
    heldout = torch.from_numpy(LocalDataProvider(f"{args.data}/heldout", 2,
                                                 spec.max_seq_len).get_samples(0, 63))
    start = heldout_loss(build_model(spec, args.seed), heldout)
    print(f"{parameter_count(build_model(spec, args.seed)):,} parameters, {args.clients} clients "
          f"x {args.per_client} sequences x {spec.max_seq_len} tokens per step, {args.steps} "
          f"steps, {args.schedule} schedule; held-out loss at step 0: {start:.4f}", flush=True)
    best_adam = None
    for lr in args.adam_lr:
        loss, a_bytes, secs = run_adamw(args, spec, train, heldout, lr)
        print(f"AdamW (data parallel) lr {lr:g}  held-out {loss:.4f}  bytes/client/step "
              f"{a_bytes:>10,.0f}  ({secs:.0f} s)", flush=True)
        best_adam = min(best_adam or (loss, lr), (loss, lr))
    a_loss = best_adam[0]
    print(f"best AdamW: lr {best_adam[1]:g}, held-out {a_loss:.4f}")
    mode = ("1-bit" if not args.no_1bit else "dense values") + (" rice" if args.rice else "")
    for k in args.topk:
        best = None
        for lr in args.distro_lr:
            d_loss, d_bytes, secs = run_distro(args, spec, train, heldout, k, lr)
            print(f"DisTrO topk {k:<3} {mode} lr {lr:g}  held-out {d_loss:.4f}  bytes/client/step "
                  f"{d_bytes:>10,.0f}  loss ratio {d_loss / a_loss:.3f}  fewer bytes "
                  f"x{a_bytes / d_bytes:,.0f}  ({secs:.0f} s)", flush=True)
            best = min(best or (d_loss, lr, d_bytes), (d_loss, lr, d_bytes))
        print(f"best DisTrO topk {k}: lr {best[1]:g}, held-out {best[0]:.4f}, loss ratio "
              f"{best[0] / a_loss:.3f}, fewer bytes x{a_bytes / best[2]:,.0f}", flush=True)


if __name__ == "__main__":
    main()
