"""A 100 MB snapshot uploaded to and downloaded from a real S3 server on loopback (versitygw,
started by this script), against copying the same file on disk, in the same run.

    . ~/.cache/psyche/venv/bin/activate
    python benchmarks/snapshot.py                        # about 30 s
    python benchmarks/snapshot.py --repeat 9 --part-size-mib 8 --concurrency 8

The snapshot: `model.safetensors` of --mb * 10^6 random bytes (incompressible, like trained
weights; not a parsed safetensors file: the store never looks inside) and a small
`config.json`, written with write_snapshot_dir. Each repeat, in this order:

- disk copy: shutil.copyfile of model.safetensors to a new file, fsync of the file and of its
  directory (what the store does for every file it writes), the baseline; and the same copy
  without the fsyncs, for reference.
- upload: S3Store.put of the snapshot under a fresh prefix (so no blob is already stored): it
  hashes the files against the manifest, sends model.safetensors as a multipart upload
  (--part-size-mib parts, --concurrency in flight) and config.json and the manifest as single
  PUTs, after a HEAD of each.
- download: S3Store.get of that snapshot into a new directory, anonymously (the bucket is
  public-read): one streamed GET per blob into a .part file, SHA-256 of every byte, fsync, and
  the rename of the directory into place.

Between repeats the snapshot is deleted from the server and os.sync() flushes what the
previous repeat left dirty (the server does not fsync), so every repeat starts alike; without
this, page cache and writeback piling up make later repeats of every kind slower.

Throughput = snapshot bytes / wall time; the medians over --repeat runs give the ratios
(store throughput / fsync'd disk copy throughput). Everything runs in one process on this
machine's 2 cores, with the server beside it; its data directory is on the same file system as
the disk copy. Writes benchmarks/results/snapshot.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from psyche_client.snapshots import open_store, write_snapshot_dir  # noqa: E402
from psyche_client.snapshots.fsio import fsync_path  # noqa: E402
from psyche_client.snapshots.s3_server import SCRIPT, start_server  # noqa: E402

MB = 10**6
MIB = 1 << 20
RESULTS = Path(__file__).resolve().parent / "results" / "snapshot.json"


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def disk_copy(src: Path, dst: Path, fsync: bool):
    shutil.copyfile(src, dst)
    if fsync:
        fsync_path(dst)
        fsync_path(dst.parent)


def summary(seconds: list, size: int) -> dict:
    med = statistics.median(seconds)
    return {"seconds": [round(s, 4) for s in seconds], "median_s": round(med, 4),
            "median_mb_per_s": round(size / med / MB, 1)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=100, help="model size in MB (10^6 bytes; default 100)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    p.add_argument("--part-size-mib", type=int, default=16, help="multipart part size (MiB)")
    p.add_argument("--concurrency", type=int, default=4, help="parts in flight at once")
    p.add_argument("--workdir", default=None, help="where the files and the server's data go "
                   "(default: a temporary directory)")
    p.add_argument("--out", default=str(RESULTS), help="results JSON (default %(default)s)")
    args = p.parse_args()

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="psyche-bench-") as tmp:
        work = Path(tmp)
        snap = write_snapshot_dir(work / "src", run_id="bench", epoch=0, step=1,
                                  param_hash="00" * 32,
                                  files={"config.json": b'{"model_type": "llama"}',
                                         "model.safetensors": os.urandom(args.mb * MB)})
        size = sum(f.stat().st_size for f in snap.iterdir() if f.name != "manifest.json")
        model = snap / "model.safetensors"
        with start_server(work / "s3") as server:
            bucket = "bench"
            options = {"part_size": args.part_size_mib * MIB, "concurrency": args.concurrency,
                       "progress": False}
            writer = open_store(f"s3://{bucket}", endpoint=server.endpoint,
                                credentials=server.credentials, **options)
            writer.create_bucket(public_read=True)
            times = {"disk_copy_fsync": [], "disk_copy_no_fsync": [], "upload": [],
                     "download": []}
            for i in range(args.repeat):
                os.sync()  # each repeat starts with no dirty pages left by the one before
                for fsync, name in ((True, "disk_copy_fsync"), (False, "disk_copy_no_fsync")):
                    dst = work / f"copy-{i}-{name}"
                    times[name].append(timed(lambda: disk_copy(model, dst, fsync)))
                    dst.unlink()
                url = f"s3://{bucket}/run-{i}"
                store = open_store(url, endpoint=server.endpoint, credentials=server.credentials,
                                   **options)
                location = None

                def put():
                    nonlocal location
                    location = store.put(snap)
                times["upload"].append(timed(put))
                assert store.last_transfer.bytes_uploaded == size
                reader = open_store(url, endpoint=server.endpoint, **options)  # anonymous
                dest = work / f"get-{i}"
                times["download"].append(timed(lambda: reader.get(location, dest)))
                assert reader.last_transfer.bytes_downloaded == size
                shutil.rmtree(dest)
                for sha in store._blob_locations():  # the server starts each repeat empty
                    store._delete_blob(sha)
                store._delete_manifest(location)
            version = subprocess.run([str(SCRIPT), "--version"], capture_output=True,
                                     text=True).stdout.strip()

    figures = {name: summary(seconds, size) for name, seconds in times.items()}
    disk = figures["disk_copy_fsync"]["median_mb_per_s"]
    nofsync = figures["disk_copy_no_fsync"]["median_mb_per_s"]
    up, down = figures["upload"]["median_mb_per_s"], figures["download"]["median_mb_per_s"]
    result = {
        "headline": {"upload_vs_disk": round(up / disk, 2),
                     "download_vs_disk": round(down / disk, 2)},
        "against_copy_without_fsync": {"upload": round(up / nofsync, 2),
                                       "download": round(down / nofsync, 2)},
        "snapshot_bytes": size,
        "part_size_mib": args.part_size_mib,
        "concurrency": args.concurrency,
        "repeat": args.repeat,
        "server": f"{version} (posix backend, loopback; it does not fsync objects)",
        "figures": figures,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    # other work on the machine: the 1-minute load average before and after
                    "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)]},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for name, f in figures.items():
        print(f"{name:20s} median {f['median_s']:7.3f} s  {f['median_mb_per_s']:8.1f} MB/s  "
              f"runs {f['seconds']}")
    print(f"upload / disk copy {result['headline']['upload_vs_disk']}, "
          f"download / disk copy {result['headline']['download_vs_disk']} "
          f"(part size {args.part_size_mib} MiB, concurrency {args.concurrency}); wrote {out}")


if __name__ == "__main__":
    main()
