"""The run's spec on chain: its canonical bytes in the run's spec account (`set_run_spec`), their
SHA-256 in the coordinator state (`spec_hash`, set with `update`). A client reads both and
trains only a spec whose bytes hash to the state's; a zero hash means the run declares no
model (simulated training)."""

import hashlib

from psyche_coordinator_core.constants import ZERO_HASH

from ..training.spec import RunSpec, SpecError
from .program import Coordinator


class RunSpecError(ValueError):
    """The run's spec cannot be used: missing, still being written, or not a spec."""


class SpecMismatch(RunSpecError):
    """A client's own spec (--run-spec) is not the run's."""


async def fetch_run_spec(c: Coordinator, run_id: str):
    """(spec_hash, RunSpec or None) of the run; RunSpecError names what is wrong."""
    instance = await c.fetch_instance(run_id)
    if instance is None:
        raise RunSpecError(f"no run {run_id!r} on {c.rpc_url} (instance "
                           f"{c.instance_key(run_id)} does not exist)")
    state = await c.fetch_state(instance.coordinator_account)
    if state.spec_hash == ZERO_HASH:
        return state.spec_hash, None
    named = state.spec_hash.hex()
    raw = await c.fetch_run_spec(c.instance_key(run_id))
    if raw is None:
        raise RunSpecError(f"run {run_id!r} names spec {named[:16]} but has no spec account: "
                           "its creator has not written it (`set-spec`)")
    got = hashlib.sha256(raw).digest()
    if got != state.spec_hash:
        raise RunSpecError(
            f"run {run_id!r} names spec {named[:16]}, but its spec account's {len(raw)} bytes "
            f"hash to {got.hex()[:16]}: its creator is rewriting it; retry once `set-spec` has "
            "finished")
    try:
        spec = RunSpec.from_canonical_bytes(raw)  # canonical: its hash is the bytes' hash
    except SpecError as e:
        raise RunSpecError(f"run {run_id!r}'s spec {named[:16]} is not a spec this client "
                           f"reads: {e}") from None
    return state.spec_hash, spec


def check_own_spec(own, chain_hash: bytes, run_id: str) -> None:
    """A client's own spec (a RunSpec, or None for simulated training) must be the run's:
    SpecMismatch otherwise, naming both hashes."""
    mine = own.spec_hash() if own is not None else ZERO_HASH
    if mine == chain_hash:
        return
    def name(h):
        return "none (simulated training)" if h == ZERO_HASH else h.hex()[:16]
    raise SpecMismatch(f"SpecMismatch: --run-spec gives spec {name(mine)}, run {run_id!r} "
                       f"trains spec {name(chain_hash)}: leave --run-spec out to train the "
                       "run's own")
