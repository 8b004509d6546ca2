"""A minimal full-screen status view of a coordinator state, redrawn in place."""

import collections
import logging
import sys

from psyche_coordinator_core import RoundCommittee, RunState


def render(state, recent_lines) -> str:
    cur = state.current_round
    lines = [f"run {state.run_id}   {state.run_state.name}   epoch {state.epoch}   "
             f"step {state.step}/{state.config.total_steps}   round {cur.height}",
             f"checkpoint {state.checkpoint.kind.name} {state.checkpoint.repo}",
             f"clients {state.healthy_count()}/{len(state.clients)} healthy, "
             f"{len(state.pending)} joined for next epoch", ""]
    witnesses = set()
    if state.run_state in (RunState.RoundTrain, RunState.RoundWitness):
        witnesses = set(RoundCommittee(cur, state.config.witness_nodes, 0).witness_indices())
    sent = {w.index for w in cur.witnesses}
    for i, c in enumerate(state.clients):
        role = "witness" + (" (sent)" if i in sent else "") if i in witnesses else ""
        lines.append(f"  {i:3d} {c.signer.hex()[:16]}  {c.state.name:9s} {role}")
    lines += ["", "recent:"] + [f"  {ln}" for ln in recent_lines[-10:]]
    return "\n".join(lines)


def redraw(text: str) -> None:
    sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")
    sys.stdout.flush()


class RecentLines(logging.Handler):
    """Keeps the last log lines for the view, in place of printing them under it."""

    def __init__(self, keep: int = 50):
        super().__init__()
        self.lines = collections.deque(maxlen=keep)

    def emit(self, record) -> None:
        self.lines.append(record.getMessage())
