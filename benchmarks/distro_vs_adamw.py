"""DisTrO against data-parallel AdamW: same model, same initial weights, same data, same tokens.

N simulated clients each train on their own shard of every step's batch.
- AdamW (data parallel): the clients' gradients are averaged every step (what an all-reduce of
  dense bf16 gradients gives), then one AdamW step. Bytes per client per step: 2 * parameters.
- DisTrO: each client compresses its momentum (top-k of a chunked DCT, 1-bit values) into a
  payload; every client applies all payloads of a step one step late, as the run does.
  Bytes per client per step: the encoded payload it sends.
Reports held-out loss of each, the final loss ratio, and the byte ratio. Not a test.

    python benchmarks/distro_vs_adamw.py --steps 200 --topk 32 4 --data config/llama-local/data
"""

import argparse
import time

import numpy as np
import torch

from psyche_client.data.local import LocalDataProvider
from psyche_coordinator_core import BatchId
from psyche_client.training.distro import DistroOptimizer, PeerResult
from psyche_client.training.model import build_model, parameter_count
from psyche_client.training.payload import decode_payload, encode_payload, result_key
from psyche_client.training.spec import ModelSpec


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


def lr_at(lr, step, warmup):
    return lr * min(1.0, step / warmup) if warmup else lr


def run_adamw(args, spec, train, heldout):
    model = build_model(spec, args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.adam_lr, betas=(0.9, 0.95),
                            weight_decay=0.0)
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
        for g in opt.param_groups:
            g["lr"] = lr_at(args.adam_lr, step, args.warmup)
        opt.step()
    return heldout_loss(model, heldout), 2 * parameter_count(model), time.time() - t0


def run_distro(args, spec, train, heldout, topk):
    models = [build_model(spec, args.seed) for _ in range(args.clients)]
    opts = [DistroOptimizer(m.parameters(), lr=args.distro_lr, topk=topk, chunk=args.chunk,
                            quantize_1bit=True) for m in models]
    pending, sizes, t0 = {}, [], time.time()
    for step in range(1, args.steps + 2):
        if step - 1 in pending:  # apply the previous step's payloads: one step late
            results = pending.pop(step - 1)
            for o in opts:
                o.apply_results(results, lr_at(args.distro_lr, step - 1, args.warmup))
        if step > args.steps:
            break
        results = []
        for c, (m, o, x) in enumerate(zip(models, opts, batches(train, step, args.clients,
                                                                    args.per_client))):
            m.train()
            m.zero_grad(set_to_none=True)
            m(input_ids=x, labels=x).loss.backward()
            payload = encode_payload(o.compress_step(lr_at(args.distro_lr, step, args.warmup)),
                                     rice=args.rice)
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
    ap.add_argument("--distro-lr", type=float, default=3e-3)
    ap.add_argument("--adam-lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rice", action="store_true", help="entropy-coded indices")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = ModelSpec(vocab_size=256)
    train = LocalDataProvider(f"{args.data}/train", 2, spec.max_seq_len, bytes([7]) * 32)
    heldout = torch.from_numpy(LocalDataProvider(f"{args.data}/heldout", 2,
                                                 spec.max_seq_len).get_samples(0, 63))
    start = heldout_loss(build_model(spec, args.seed), heldout)
    print(f"{parameter_count(build_model(spec, args.seed)):,} parameters, {args.clients} clients "
          f"x {args.per_client} sequences x {spec.max_seq_len} tokens per step, {args.steps} "
          f"steps; held-out loss at step 0: {start:.4f}")
    a_loss, a_bytes, a_time = run_adamw(args, spec, train, heldout)
    print(f"AdamW (data parallel)  held-out {a_loss:.4f}  bytes/client/step {a_bytes:>10,.0f}"
          f"  ({a_time:.0f} s)")
    for k in args.topk:
        d_loss, d_bytes, d_time = run_distro(args, spec, train, heldout, k)
        print(f"DisTrO topk {k:<3} 1-bit{' rice' if args.rice else ''}  held-out {d_loss:.4f}  "
              f"bytes/client/step {d_bytes:>10,.0f}  loss ratio {d_loss / a_loss:.3f}  "
              f"fewer bytes x{a_bytes / d_bytes:,.0f}  ({d_time:.0f} s)")


if __name__ == "__main__":
    main()
