"""Compute units of the coordinator program under Solana's VM: the SBF build kept in the
repository (sbf/psyche_coordinator.so, from scripts/build-sbf) in the local chain's runtime
(LiteSVM 0.7.1, agave 2.3), metered by the runtime itself.

    python -m benchmarks.compute_units [--round-seconds 32]

What it runs (release builds of the local chain's test binary, about a minute warm):
  1. `compute_units_per_instruction_on_sbf` (localnet/tests/suites/compute_units.rs): a
     permissioned run at 1, 32 and 256 clients through every instruction (ticks labelled by the
     run states they move between); the most units each used;
  2. `conformance_vectors_replayed_on_sbf`: every conformance vector replayed on the ELF with
     the state compared after every step (how many were replayed);
  3. the heap suite (`suites::heap`): the SBF heap each instruction uses, from the model of the
     32 KiB bump heap that the native runtime replays allocations into (support/sbf_heap.rs);
  4. a scan of the ELF for the largest stack frame: the deepest r10-relative access (loads and
     stores at r10 - off, and addresses r10 - imm taken into a register), the frame a function
     needs of the VM's 4 KiB; loads from a frame's lowest 64 bytes are left out: they read
     stack arguments (functions of more than 5 arguments), which the caller stores just past
     its own frame, at the bottom of the callee's;
and, from the figures, the SOL a contributor pays per hour at one witness transaction per round
(the base fee of 5,000 lamports per signature, no priority fee; a round of --round-seconds,
default 32: the default config's 30 s of training and 2 s of witnessing, the longest a round
lasts).

Writes benchmarks/results/compute_units.json (`headline`: max_cu_per_instruction,
max_stack_frame_bytes, vectors_replayed_on_sbf, elf_bytes, sol_fees_per_client_hour) and the
table between the compute-units markers of benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ELF = ROOT / "sbf" / "psyche_coordinator.so"
RESULT = ROOT / "benchmarks" / "results" / "compute_units.json"
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- compute_units:begin -->", "<!-- compute_units:end -->"
LAMPORTS_PER_SIGNATURE = 5000
LIMIT = 200_000      # a transaction's default compute budget per instruction
TARGET = 150_000     # what each instruction must stay under (issue 17)
STACK_FRAME = 4096   # the VM's frame


def cargo_test(name: str, *extra: str, env: dict | None = None) -> str:
    cmd = ["cargo", "test", "--release", "-p", "psyche-localnet", "--test", "localnet", name,
           "--", "--nocapture", *extra]
    print("$", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        sys.exit(f"compute_units: {name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done.stdout


def largest_stack_frame(elf: bytes) -> int:
    """The deepest r10-relative offset in .text (see the module's docstring)."""
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)
                for i in range(shnum)]
    names_off = sections[shstrndx][4]

    def name(sh):
        raw = elf[names_off + sh[0]:]
        return raw[:raw.index(b"\0")].decode()

    text = next(sh for sh in sections if name(sh) == ".text")
    start, size = text[4], text[5]
    deepest = 0
    from_r10 = set()  # registers holding r10 (mov rX, r10) until written otherwise
    at = start
    while at < start + size:
        op, regs = elf[at], elf[at + 1]
        dst, src = regs & 0xF, regs >> 4
        (off,) = struct.unpack_from("<h", elf, at + 2)
        (imm,) = struct.unpack_from("<i", elf, at + 4)
        cls = op & 0x07
        if cls in (0x01, 0x02, 0x03):  # ldx (src base), st / stx (dst base)
            base = src if cls == 0x01 else dst
            # a load from the frame's lowest 64 bytes is a stack argument (arguments 6 and on,
            # which the caller wrote past its own frame), not the depth of the callee's locals
            arg_read = cls == 0x01 and -off > STACK_FRAME - 64
            if base == 10 and off < 0 and not arg_read:
                deepest = max(deepest, -off)
            if cls == 0x01:
                from_r10.discard(dst)
        elif op == 0xBF and src == 10:  # mov64 dst, r10
            from_r10.add(dst)
        elif op == 0x07 and dst in from_r10:  # add64 dst, imm: an address in the frame
            if imm < 0:
                deepest = max(deepest, -imm)
            from_r10.discard(dst)
        elif cls in (0x04, 0x07) and op != 0xBF:
            from_r10.discard(dst)
        elif op == 0xBF:
            from_r10.discard(dst)
        at += 16 if op == 0x18 else 8
    return deepest


def heap_table(out: str) -> dict[str, int]:
    """`SBF est.` bytes per instruction from the heap suite's table."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"(\S.*?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+%$",
                     line)
        if m:
            rows[m.group(1).strip()] = int(m.group(8))
    return rows


def markdown(units: dict, sizes: list[str]) -> str:
    labels = sorted({label for table in units.values() for label in table})
    lines = ["| instruction (transaction) | " + " | ".join(f"{n} client{'s' * (n != '1')}"
                                                       for n in sizes) + " |",
             "| --- |" + " ---: |" * len(sizes)]
    for label in labels:
        cells = []
        for n in sizes:
            row = units[n].get(label)
            if row is None:
                cells.append("-")
            else:
                mark = " **!**" if row["units"] > TARGET else ""
                cells.append(f"{row['units']:,}{mark}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--round-seconds", type=float, default=32.0,
                    help="length of a round for the fee per hour (default 32)")
    args = ap.parse_args(argv)
    if not ELF.exists():
        sys.exit(f"compute_units: no {ELF}: build it with scripts/build-sbf")
    t0 = time.monotonic()
    elf = ELF.read_bytes()

    with tempfile.TemporaryDirectory() as tmp:
        out_json = Path(tmp) / "units.json"
        table_out = cargo_test("compute_units_per_instruction_on_sbf", "--ignored",
                               env={"PSYCHE_COMPUTE_UNITS_JSON": str(out_json)})
        units = json.loads(out_json.read_text())
    print(table_out[table_out.find("compute units per transaction"):], flush=True)
    vectors_out = cargo_test("conformance_vectors_replayed_on_sbf")
    m = re.search(r"replayed (\d+) vectors: (\d+) steps, (\d+) sent", vectors_out)
    if not m:
        sys.exit("compute_units: the vectors' replay printed no summary")
    vectors, sent = int(m.group(1)), int(m.group(3))
    heap = heap_table(cargo_test("heap_per_instruction_fits_the_sbf_heap"))
    frame = largest_stack_frame(elf)

    sizes = sorted(units, key=int)
    max_label, max_units = max(((f"{label} at {n}", row["units"])
                                for n in sizes for label, row in units[n].items()),
                               key=lambda x: x[1])
    over = sorted({f"{label} at {n} clients" for n in sizes
                   for label, row in units[n].items() if row["units"] > TARGET})
    rounds_per_hour = 3600.0 / args.round_seconds
    fees = rounds_per_hour * LAMPORTS_PER_SIGNATURE / 1e9
    headline = {
        "max_cu_per_instruction": max_units,
        "max_stack_frame_bytes": frame,
        "vectors_replayed_on_sbf": vectors,
        "elf_bytes": len(elf),
        "sol_fees_per_client_hour": round(fees, 9),
    }
    result = {
        "headline": headline,
        "max_cu_instruction": max_label,
        "over_150k": over,
        "compute_units": units,
        "vectors_instructions_sent": sent,
        "heap_bytes_per_instruction_model": heap,
        "max_heap_bytes_model": max(heap.values()) if heap else None,
        "fee_assumptions": {"round_seconds": args.round_seconds,
                            "lamports_per_signature": LAMPORTS_PER_SIGNATURE,
                            "witness_transactions_per_round": 1, "priority_fee": 0},
        "elf_sha256": __import__("hashlib").sha256(elf).hexdigest(),
        "runtime": "LiteSVM 0.7.1 (agave 2.3), SBPF v0 ELF from scripts/build-sbf "
                   "(rustc 1.96 + LLVM 23 + sbpf-linker 0.2.6, not platform-tools)",
        "wall_seconds": round(time.monotonic() - t0, 1),
    }
    RESULT.write_text(json.dumps(result, indent=2) + "\n")

    section = "\n".join([
        BEGIN,
        f"Measured {time.strftime('%Y-%m-%d')} by `python -m benchmarks.compute_units` "
        f"({result['wall_seconds']:.0f} s warm), ELF {len(elf):,} bytes "
        f"(sha256 `{result['elf_sha256'][:12]}…`). Units per transaction, the most of its "
        "sends (**!**: over the 150,000 target; a transaction may ask for up to 1,400,000):",
        "",
        markdown(units, sizes),
        "",
        f"- Headline: `max_cu_per_instruction` **{max_units:,}** ({max_label} clients), "
        f"`max_stack_frame_bytes` **{frame:,}** (of {STACK_FRAME:,}), "
        f"`vectors_replayed_on_sbf` **{vectors}** ({sent:,} instructions, state compared after "
        f"each), `elf_bytes` **{len(elf):,}**, `sol_fees_per_client_hour` **{fees:.6f}** "
        f"({rounds_per_hour:.1f} rounds of {args.round_seconds:g} s, one witness transaction "
        f"each at {LAMPORTS_PER_SIGNATURE:,} lamports).",
        f"- Heap (the model of the 32 KiB bump heap, `suites::heap`): at most "
        f"{max(heap.values()):,} bytes ({max(heap, key=heap.get)})." if heap else "- Heap: -",
        f"- Over 150,000: {', '.join(over) if over else 'none'}.",
        END,
    ])
    text = README.read_text()
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text += "\n" + section + "\n"
    README.write_text(text)
    print(json.dumps(headline, indent=2))
    print(f"wrote {RESULT.relative_to(ROOT)} and the table in {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
