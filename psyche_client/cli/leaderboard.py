"""The leaderboard both backends print: a ledger of contributor points, ranked, as a table or
as JSON. The numbers come from the coordinator core (`points.with_unsettled`, `points.ranked`);
this module only lays them out."""

import json

from psyche_coordinator_core import RunConfig, ranked


def rows(ledger: dict, config: RunConfig) -> list:
    """One dict per identity, best first: what `--json` prints."""
    out = []
    for rank, p in ranked(ledger):
        out.append({
            "rank": rank,
            "identity": p.identity.hex(),
            "presence_rounds": p.presence_rounds,
            "presence_points": p.presence_points,
            "sequences": p.sequences,
            "tokens": p.tokens,
            "flops": p.flops(config),
            "compute_points": p.compute_points,
            "total": p.total,
        })
    return out


def render_json(ledger: dict, config: RunConfig) -> str:
    return json.dumps({"leaderboard": rows(ledger, config)}, indent=1)


def _flops(n: int) -> str:
    for unit, scale in (("EFLOP", 10**18), ("PFLOP", 10**15), ("TFLOP", 10**12),
                        ("GFLOP", 10**9), ("MFLOP", 10**6)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} FLOP"


def render_table(ledger: dict, config: RunConfig) -> str:
    """A fixed-width table: rank, identity (first 16 hex digits), presence, compute, total."""
    head = ("rank", "identity", "rounds", "presence", "sequences", "tokens", "compute FLOPs",
            "compute", "total")
    lines = [head]
    for r in rows(ledger, config):
        flops = _flops(r["flops"]) if config.flops_per_token else "unknown"
        lines.append((str(r["rank"]), r["identity"][:16], str(r["presence_rounds"]),
                      str(r["presence_points"]), str(r["sequences"]), str(r["tokens"]), flops,
                      str(r["compute_points"]), str(r["total"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = ["  ".join(cell.rjust(w) if i != 1 else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(line, widths))) for line in lines]
    if len(lines) == 1:
        text.append("(no points yet)")
    return "\n".join(text)
