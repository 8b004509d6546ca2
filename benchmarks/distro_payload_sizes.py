"""Bytes per kept coefficient of the DisTrO payload, for every encoding, on real gradients.

    . ~/.cache/psyche/venv/bin/activate
    python benchmarks/distro_payload_sizes.py            # tiny Llama, CPU, about 1 minute
    python benchmarks/distro_payload_sizes.py --steps 20 --hidden 512

A small Llama (transformers, random init) trains on random tokens with DisTrO (one client that
applies its own result each step); after ``--steps`` steps the compressed update is encoded in each
mode. For comparison it also reports the gap-coded indices compressed with zlib and lzma (not
payload modes), the same model with uniformly random indices, and the entropy bound
``log2 C(totalk, k) / k`` bits per index. Needs the ``train`` extra (torch, transformers)."""

from __future__ import annotations

import argparse
import lzma
import math
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from psyche_client.training.distro import DistroOptimizer, PeerResult, SparseParam  # noqa: E402
from psyche_client.training.payload import coefficient_count, encode_payload  # noqa: E402


def tiny_llama(hidden: int, layers: int, vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                      num_attention_heads=max(1, hidden // 64),
                      num_key_value_heads=max(1, hidden // 64),
                      vocab_size=vocab, max_position_embeddings=512, tie_word_embeddings=False)
    torch.manual_seed(1337)
    return LlamaForCausalLM(cfg)


def entropy_bound_bits(sent: list[SparseParam]) -> float:
    bits = 0.0
    for sp in sent:
        bits += sp.nchunks * (math.lgamma(sp.totalk + 1) - math.lgamma(sp.k + 1)
                              - math.lgamma(sp.totalk - sp.k + 1)) / math.log(2)
    return bits


def gap_bytes(sent: list[SparseParam]) -> bytes:
    out = []
    for sp in sent:
        idx = sp.indices.numpy()
        g = idx.copy()
        g[:, 1:] = idx[:, 1:] - idx[:, :-1] - 1
        out.append(g.astype("<u2" if sp.totalk <= 65536 else "<u4").tobytes())
    return b"".join(out)


def uniform_like(sent: list[SparseParam], seed: int = 0) -> list[SparseParam]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for sp in sent:
        idx = torch.rand(sp.nchunks, sp.totalk, generator=g).argsort(1)[:, :sp.k].sort(1).values
        out.append(SparseParam(sp.shape, sp.chunk, idx, sp.values))
    return out


def rows_for(sent, n, label):
    rows = []
    for rice in (False, True):
        data = encode_payload(sent, rice=rice)
        rows.append((label, "rice" if rice else "raw u16", len(data), len(data) / n))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--topk", type=int, nargs="*", default=[2, 8, 32])
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = tiny_llama(args.hidden, args.layers, args.vocab)
    params = [p for p in model.parameters() if p.requires_grad]
    nparams = sum(p.numel() for p in params)
    print(f"model: {nparams:,} parameters in {len(params)} tensors, torch {torch.__version__}")
    g = torch.Generator().manual_seed(0)
    print("| k | values | indices | payload bytes | bytes / coefficient | vs dense bf16 |")
    print("|---|---|---|---|---|---|")
    for k in args.topk:
        model_k = tiny_llama(args.hidden, args.layers, args.vocab)
        ps = [p for p in model_k.parameters() if p.requires_grad]
        opt = DistroOptimizer(ps, lr=4e-4, topk=k, quantize_1bit=False)
        t0 = time.time()
        for step in range(args.steps):
            tokens = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
            model_k.zero_grad()
            model_k(input_ids=tokens, labels=tokens).loss.backward()
            sent = opt.compress_step()
            opt.apply_results([PeerResult(b"self", tuple(sent))])
        full = opt.last_unquantized
        n = coefficient_count(full)
        variants = {
            "1-bit": [SparseParam(s.shape, s.chunk, s.indices, torch.signbit(s.values))
                      for s in full],
            "bf16": [SparseParam(s.shape, s.chunk, s.indices, s.values.bfloat16()) for s in full],
            "fp32": [SparseParam(s.shape, s.chunk, s.indices, s.values.float()) for s in full],
        }
        for label, sent in variants.items():
            for _, idxmode, size, bpc in rows_for(sent, n, label):
                print(f"| {k} | {label} | {idxmode} | {size:,} | {bpc:.3f} | "
                      f"{2 * nparams / size:.0f}x |")
        gb = gap_bytes(full)
        ent = entropy_bound_bits(full) / n
        uni = uniform_like(variants["1-bit"])
        uni_rice = len(encode_payload(uni, rice=True)) / n
        print(f"| {k} | (indices only) | gaps+zlib-9 {len(zlib.compress(gb, 9)) / n:.3f}, "
              f"gaps+lzma {len(lzma.compress(gb, preset=9)) / n:.3f}, "
              f"entropy bound (uniform) {ent / 8:.3f} B/index | | | |")
        print(f"| {k} | 1-bit, uniform random indices | rice | | {uni_rice:.3f} | |")
        print(f"<!-- k={k}: {n:,} coefficients, {args.steps} steps in {time.time() - t0:.1f}s -->")


if __name__ == "__main__":
    main()
