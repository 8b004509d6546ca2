import itertools
import os

import pytest

from psyche_client.snapshots import open_store, write_snapshot_dir

_buckets = itertools.count()


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh public-read bucket on the session's S3 server: its s3:// URL."""
    name = f"test-{os.getpid()}-{next(_buckets)}"
    writer = open_store(f"s3://{name}", endpoint=s3_server.endpoint,
                        credentials=s3_server.credentials, progress=False)
    writer.create_bucket(public_read=True)
    return f"s3://{name}/run"


def make_snapshot(root, step, model_bytes, epoch=0, run_id="run", config=b'{"n_layer": 2}'):
    """A snapshot directory root/step-<step> with random model bytes of the given size."""
    return write_snapshot_dir(root, run_id=run_id, epoch=epoch, step=step,
                              param_hash=f"{step:064x}",
                              files={"config.json": config,
                                     "model.safetensors": os.urandom(model_bytes)})


def same_files(a, b) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)
