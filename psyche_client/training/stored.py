"""Snapshots in Hugging Face layout, for the run's snapshot store (psyche_client/snapshots).

A snapshot holds `config.json` (the model's LlamaConfig) and `model.safetensors` (every
parameter, as `LlamaForCausalLM.from_pretrained` reads them), plus the store's manifest. The
trainer captures one (`hf_files`) and loads one into the model it built from the run's spec
(`load_stored`), checking the parameters hash to what the coordinator recorded."""

import tempfile
from pathlib import Path

from .errors import ModelUnavailable
from .model import parameter_hash
from .snapshot import SnapshotError, load_snapshot

CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"


def hf_files(model) -> dict:
    """{file name: bytes} of the model in Hugging Face layout."""
    from safetensors.torch import save
    tensors = {name: p.detach().to("cpu").contiguous() for name, p in model.named_parameters()}
    # transformers refuses safetensors files without the framework in their metadata
    weights = save(tensors, metadata={"format": "pt"})
    return {CONFIG_NAME: model.config.to_json_string().encode(), WEIGHTS_NAME: weights}


def open_run_store(checkpoint_spec, credentials=None, progress=True):
    """The run's snapshot store from its spec ([checkpoint] store, endpoint)."""
    from ..snapshots import open_store
    return open_store(checkpoint_spec.store, endpoint=checkpoint_spec.endpoint or None,
                      credentials=credentials, progress=progress)


def load_stored(model, checkpoint_spec, location: str, expected: str, step: int) -> str:
    """Download the snapshot at `location` from the run's store (anonymous read), copy it into
    `model` and check its parameters hash to `expected` (hex). When that copy fails (poisoned by
    its checkpointer, corrupt, pruned), any other snapshot in the store of the same step that
    loads to `expected` is the same model: the first such is used. Returns the location loaded.
    Raises ModelUnavailable with the reason otherwise: no store in the spec, store unreachable,
    no copy that loads to the recorded hash."""
    from ..snapshots import SnapshotStoreError
    what = f"the recorded snapshot of step {step} ({location[:16]})"
    if not checkpoint_spec.store:
        raise ModelUnavailable(f"the run resumes from {what}, but its spec names no snapshot "
                               "store ([checkpoint] store)")
    try:
        store = open_run_store(checkpoint_spec)
    except SnapshotStoreError as e:
        raise ModelUnavailable(f"cannot open {checkpoint_spec.store}: {type(e).__name__}: {e}") \
            from None
    why = _load_copy(model, store, location, expected, what, checkpoint_spec.store)
    if why is None:
        return location
    try:
        others = [loc for loc, m in store.list()
                  if loc != location and m.step == step and m.param_hash == expected]
    except (SnapshotStoreError, OSError):  # no listing: the recorded copy's reason stands
        others = []
    for loc in others:
        if _load_copy(model, store, loc, expected, what, checkpoint_spec.store) is None:
            return loc
    tried = f"; none of the {len(others)} other copies of step {step} in the store loads to " \
            "it either" if others else ""
    raise ModelUnavailable(why + tried)


def _load_copy(model, store, location, expected, what, where) -> str | None:
    """Load the snapshot at `location` into `model`; None when its parameters hash to
    `expected`, else why not."""
    from ..snapshots import SnapshotStoreError
    try:
        with tempfile.TemporaryDirectory(prefix="psyche-snapshot-") as tmp:
            dest = Path(tmp) / "snapshot"
            store.get(location, dest)
            data = (dest / WEIGHTS_NAME).read_bytes()
    except SnapshotStoreError as e:
        return f"cannot get {what} from {where}: {type(e).__name__}: {e}"
    except OSError as e:  # the snapshot lacks the weights file, or the disk is full
        return f"cannot read {what}: {e}"
    try:
        load_snapshot(model, data)
    except SnapshotError as e:
        return f"{what} does not fit the run's model: {e}"
    got = parameter_hash(model)
    if got != expected:
        return (f"{what} loads to params {got[:16]}, not the {expected[:16]} the coordinator "
                "recorded")
    return None
