"""psyche-snapshot: the run's snapshots in its store: list them, download one, check it and
print its held-out loss."""

import sys
import tempfile
from pathlib import Path

import click

from ..server.state_file import StateFileError, load_run_spec, load_state_file
from .common import fail

HELP = """The model snapshots of a training run, in the run's snapshot store.

Elected checkpointers write a snapshot (Hugging Face layout: config.json and model.safetensors,
plus manifest.json with the run id, epoch, step and parameter hash) at every Cooldown and every
checkpoint_interval steps, upload it to the store named by the [checkpoint] table of the run's
state.toml, and the coordinator records it when its parameter hash is the one the witnesses
agreed on. These commands read the store anonymously: no credentials are needed.

\b
  psyche-snapshot list --state state.toml
  psyche-snapshot download --state state.toml LOCATION DEST
  psyche-snapshot check --state state.toml [LOCATION]   (default: the latest snapshot)

--store and --endpoint name a store directly, instead of the state file's."""


def store_options(fn):
    fn = click.option("--endpoint", default=None,
                      help="The S3-compatible server's URL for an s3:// store "
                      "(default: the state file's [checkpoint] endpoint).")(fn)
    fn = click.option("--store", default=None,
                      help="The store's URL: a path, file:///PATH or s3://BUCKET/PREFIX "
                      "(default: the state file's [checkpoint] store).")(fn)
    fn = click.option("--state", "state_path", type=click.Path(dir_okay=False, exists=True),
                      default=None, help="The run's state.toml: its [checkpoint] store, and "
                      "(check) its model and held-out data.")(fn)
    return fn


def _spec(state_path):
    if state_path is None:
        return None
    try:
        return load_run_spec(state_path, load_state_file(state_path))
    except StateFileError as e:
        fail(str(e))


def _store(spec, store, endpoint):
    from ..snapshots import SnapshotStoreError, open_store
    url = store or (spec.checkpoint.store if spec is not None else "")
    if not url:
        fail("no store: give --store, or --state with a [checkpoint] store")
    if endpoint is None and store is None and spec is not None:
        endpoint = spec.checkpoint.endpoint or None
    try:
        return open_store(url, endpoint=endpoint, progress=sys.stderr.isatty())
    except SnapshotStoreError as e:
        fail(str(e))


def _guard(fn, *args):
    from ..snapshots import SnapshotStoreError
    try:
        return fn(*args)
    except SnapshotStoreError as e:
        fail(f"{type(e).__name__}: {e}", 1)


@click.group(help=HELP)
def main():
    pass


@main.command("list", help="Every complete snapshot in the store, oldest step first: location, "
              "run, epoch, step, parameter hash, size.")
@store_options
def list_(state_path, store, endpoint):
    s = _store(_spec(state_path), store, endpoint)
    found = _guard(s.list)
    if not found:
        click.echo(f"no snapshots in {s.describe()}")
    for location, m in found:
        click.echo(f"{location}  run {m.run_id}  epoch {m.epoch}  step {m.step}  "
                   f"params {m.param_hash}  {m.total_size:,} bytes")


@main.command(help="Download the snapshot at LOCATION (64 hex digits) into DEST, every file's "
              "SHA-256 checked against its manifest; an interrupted download resumes.")
@click.argument("location")
@click.argument("dest", type=click.Path(file_okay=False))
@store_options
def download(location, dest, state_path, store, endpoint):
    s = _store(_spec(state_path), store, endpoint)
    m = _guard(s.get, location, Path(dest))
    click.echo(f"downloaded step {m.step} (epoch {m.epoch}, params {m.param_hash}) to {dest}")


@main.command(help="Download a snapshot (LOCATION, default the latest), load it with "
              "transformers' LlamaForCausalLM.from_pretrained, check its parameters hash to the "
              "manifest's (and to --expect-hash), and print its held-out loss on the run's "
              "held-out set (--state: [data] heldout_dir or heldout_urls). Exits 1 on a "
              "mismatch.")
@click.argument("location", required=False)
@store_options
@click.option("--expect-hash", default=None,
              help="The parameter hash the coordinator recorded (checkpoint.hash), 64 hex.")
@click.option("--keep", "keep_dir", type=click.Path(file_okay=False), default=None,
              help="Keep the downloaded snapshot here (default: a temporary directory).")
@click.option("--micro-batch-size", type=click.IntRange(1), default=8, show_default=True,
              help="Sequences per forward pass; the clients' setting reproduces their figure.")
@click.option("--device", default="cpu", show_default=True, help="torch device.")
def check(location, state_path, store, endpoint, expect_hash, keep_dir, micro_batch_size,
          device):
    spec = _spec(state_path)
    s = _store(spec, store, endpoint)
    if location is None:
        found = _guard(s.list)
        if not found:
            fail(f"no snapshots in {s.describe()}", 1)
        location = found[-1][0]
    with tempfile.TemporaryDirectory(prefix="psyche-snapshot-") as tmp:
        dest = Path(keep_dir) if keep_dir else Path(tmp) / "snapshot"
        m = _guard(s.get, location, dest)
        click.echo(f"snapshot {location}: run {m.run_id}, epoch {m.epoch}, step {m.step}")
        _evaluate(dest, m, spec, expect_hash, micro_batch_size, device)


def _evaluate(path, manifest, spec, expect_hash, micro_batch_size, device):
    import torch
    from transformers import LlamaForCausalLM

    from ..training.heldout import heldout_loss
    from ..training.model import parameter_hash
    from ..training.trainer import make_provider
    # the clients' kernels (eager attention) and dtype: the same figure as theirs
    dtype = getattr(torch, spec.model.dtype) if spec is not None else torch.float32
    model = LlamaForCausalLM.from_pretrained(path, attn_implementation="eager",
                                             torch_dtype=dtype).to(device)
    digest = parameter_hash(model)
    click.echo(f"loaded with transformers: params {digest}")
    if digest != manifest.param_hash:
        fail(f"the parameters hash to {digest}, the manifest says {manifest.param_hash}", 1)
    if expect_hash and digest != expect_hash.lower():
        fail(f"the parameters hash to {digest}, not the expected {expect_hash}", 1)
    click.echo("parameter hash: ok")
    if spec is None:
        click.echo("no held-out loss: give --state for the run's held-out set")
        return
    heldout = make_provider(spec, None, None, spec.model.max_seq_len, heldout=True)
    if heldout is None:
        click.echo("no held-out loss: the run's [data] has no heldout_dir or heldout_urls")
        return
    loss = heldout_loss(model, heldout, spec.data.heldout_sequences, micro_batch_size,
                        torch.device(device))
    click.echo(f"held-out loss {loss!r}")


if __name__ == "__main__":
    main()
