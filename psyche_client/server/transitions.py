"""Human-readable lines for what changed between two coordinator states."""

from psyche_coordinator_core import ClientState


def short(key: bytes) -> str:
    return key.hex()[:8]


def describe_changes(old, new) -> list:
    lines = []
    if old.run_state != new.run_state:
        lines.append(f"phase: {old.run_state.name} -> {new.run_state.name} "
                     f"(epoch {new.epoch}, step {new.step}, round {new.current_round.height}, "
                     f"{new.healthy_count()}/{len(new.clients)} healthy, "
                     f"{len(new.pending)} joined for next epoch)")
    elif old.step != new.step:
        lines.append(f"phase: {new.run_state.name} (epoch {new.epoch}, step {new.step})")
    old_pending = {c.signer for c in old.pending}
    for c in new.pending:
        if c.signer not in old_pending:
            lines.append(f"client {short(c.signer)} joined for the next epoch")
    old_states = {c.signer: c.state for c in old.clients}
    for c in new.clients:
        before = old_states.get(c.signer)
        if before == ClientState.Healthy and c.state != ClientState.Healthy:
            why = {ClientState.Dropped: "dropped by health check",
                   ClientState.Evicted: "evicted by its verifiers' evidence"}.get(c.state,
                                                                                  "withdrew")
            lines.append(f"client {short(c.signer)} {why}")
    if old.checkpoint != new.checkpoint:
        ck = new.checkpoint
        lines.append(f"checkpoint: {ck.kind.name} {ck.repo or '-'} {ck.revision}".rstrip())
    return lines
