"""python -m psyche_client.snapshots: put, get, list and prune snapshots in a store, and create
a bucket on an S3-compatible server. Write credentials come from PSYCHE_S3_ACCESS_KEY and
PSYCHE_S3_SECRET_KEY (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY); without them requests are
anonymous, which a public-read bucket allows for reading only."""

import sys

import click

from .errors import SnapshotStoreError
from .open import open_store
from .s3 import DEFAULT_CONCURRENCY, DEFAULT_PART_SIZE, credentials_from_env

MIB = 1 << 20
url_arg = click.argument("url")
endpoint_opt = click.option("--endpoint", default=None,
                            help="S3-compatible server URL, e.g. http://127.0.0.1:7070.")


def store_of(url, endpoint, part_size_mib=None, concurrency=None):
    options = {}
    if url.startswith("s3://"):
        options = {"part_size": int((part_size_mib or DEFAULT_PART_SIZE // MIB) * MIB),
                   "concurrency": concurrency or DEFAULT_CONCURRENCY}
    return open_store(url, endpoint=endpoint, credentials=credentials_from_env(), **options)


@click.group(help="Snapshots in a store: a local directory, or s3://BUCKET/PREFIX with "
             "--endpoint.")
def main():
    pass


@main.command(help="Store the snapshot directory DIR; prints its location.")
@url_arg
@click.argument("snapshot_dir", type=click.Path(exists=True, file_okay=False))
@endpoint_opt
@click.option("--part-size-mib", type=click.FloatRange(5), default=None,
              help=f"Multipart part size (default {DEFAULT_PART_SIZE // MIB}).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=None,
              help=f"Parts in flight at once (default {DEFAULT_CONCURRENCY}).")
def put(url, snapshot_dir, endpoint, part_size_mib, concurrency):
    store = store_of(url, endpoint, part_size_mib, concurrency)
    click.echo(store.put(snapshot_dir))


@main.command(help="Download the snapshot at LOCATION into DEST, every file's hash checked.")
@url_arg
@click.argument("location")
@click.argument("dest", type=click.Path(file_okay=False))
@endpoint_opt
def get(url, location, dest, endpoint):
    m = store_of(url, endpoint).get(location, dest)
    click.echo(f"{dest}: run {m.run_id} epoch {m.epoch} step {m.step} "
               f"parameters {m.param_hash}")


@main.command("list", help="The store's complete snapshots, oldest step first.")
@url_arg
@endpoint_opt
def list_(url, endpoint):
    for location, m in store_of(url, endpoint).list():
        click.echo(f"{location}  run {m.run_id} epoch {m.epoch} step {m.step} "
                   f"{m.total_size:,} bytes")


@main.command(help="Keep the last KEEP snapshots by step; remove the rest and their blobs.")
@url_arg
@click.option("--keep", type=click.IntRange(1), required=True)
@endpoint_opt
def prune(url, keep, endpoint):
    for location in store_of(url, endpoint).prune(keep):
        click.echo(f"removed {location}")


@main.command("create-bucket", help="Create the bucket of s3://BUCKET (public read unless "
              "--private); needs credentials.")
@url_arg
@endpoint_opt
@click.option("--private", is_flag=True, help="No public-read policy.")
def create_bucket(url, endpoint, private):
    store = store_of(url, endpoint)
    if not hasattr(store, "create_bucket"):
        raise click.UsageError("create-bucket is for s3:// stores")
    store.create_bucket(public_read=not private)
    click.echo(f"bucket ready: {store.describe()}")


def run():
    try:
        main(standalone_mode=False)
    except SnapshotStoreError as e:
        click.echo(f"psyche snapshots: {e}", err=True)
        sys.exit(1)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.Abort:
        sys.exit(130)


if __name__ == "__main__":
    run()
