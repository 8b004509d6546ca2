"""Wall time of a training round, split into compute and waiting: N clients on loopback.

Runs the real local testnet (server, data server, N client processes) on a small training run,
then reads each client's metrics: a round's wall time is the time from the start of its training
to the start of the next round's training; compute is the training itself (data, forward,
backward, compression) plus applying the previous results. The rest is waiting: the witness
phase, results in flight, the coordinator's ticks. Not a test.

    python benchmarks/round_timing.py --clients 4 --steps 30 --per-client 8 32
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import tomli_w

ROOT = Path(__file__).resolve().parents[1]


def prepare_data(dirpath: Path) -> Path:
    data = ROOT / "config/llama-local/data"
    if (data / "train").is_dir():
        return data
    def run(*a):
        subprocess.run([sys.executable, "-m", "psyche_client.cli.data", *a],
                       check=True, capture_output=True)
    run("build-corpus", "--out", str(dirpath / "corpus.txt"), "--max-mb", "2")
    run("tokenize", "--input", str(dirpath / "corpus.txt"), "--out", str(dirpath),
        "--tokenizer", "bytes")
    return dirpath


def write_run(d: Path, data: Path, clients: int, per_client: int, steps: int, data_port: int):
    state = {"run_id": "timing", "run_seed": 1,
             "config": dict(warmup_time=50, cooldown_time=1, max_round_train_time=50,
                            round_witness_time=1, epoch_time=100000, total_steps=steps,
                            max_seq_len=128, min_clients=clients, init_min_clients=clients,
                            witness_nodes=0, global_batch_size_start=clients * per_client,
                            global_batch_size_end=clients * per_client,
                            waiting_for_members_extra_time=1),
             "model": dict(vocab_size=256, intermediate_size=512, max_seq_len=128),
             "optimizer": dict(lr=0.003, topk=32),
             "data": dict(kind="server", address=f"127.0.0.1:{data_port}", token_size=2)}
    (d / "state.toml").write_text(tomli_w.dumps(state))
    (d / "data.toml").write_text(tomli_w.dumps({"dir": str(data / "train"), "token_size": 2,
                                                "seq_len": 128}))


def measure(args, per_client: int, data: Path) -> dict:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        data_port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write_run(d, data, args.clients, per_client, args.steps, data_port)
        out = subprocess.run([sys.executable, "-m", "psyche_client.cli.local_testnet", "start",
                              "--num-clients", str(args.clients), "--config-path", str(d),
                              "--server-port", "0", "--timeout", "1200"],
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            sys.exit(f"testnet failed:\n{out.stdout[-3000:]}")
        workdir = Path(re.search(r"keys in (\S+)\)", out.stdout).group(1))
        shares, walls, computes = [], [], []
        for n in range(1, args.clients + 1):
            lines = (workdir / f"client-{n}.jsonl").read_text().splitlines()
            events = [json.loads(x) for x in lines]
            trains = sorted((e for e in events if e["event"] == "train"), key=lambda e: e["step"])
            applies = [e for e in events if e["event"] == "apply"]
            for a, b in zip(trains, trains[1:]):
                if b["step"] != a["step"] + 1 or a["step"] <= args.skip:
                    continue
                wall = b["started"] - a["started"]
                # applies done between these trainings belong to this round
                applied = sum(e["compute_s"] for e in applies
                              if a["started"] < e["time"] <= b["started"])
                compute = a["compute_s"] + applied
                walls.append(wall)
                computes.append(compute)
                shares.append(compute / wall)
    return {"per_client": per_client, "rounds": len(walls), "wall": statistics.mean(walls),
            "compute": statistics.mean(computes), "share": statistics.mean(shares)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--per-client", type=int, nargs="+", default=[8, 32],
                    help="sequences each client trains per round (more = more compute per round)")
    ap.add_argument("--skip", type=int, default=3, help="ignore the first rounds (warm-up)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = prepare_data(Path(tmp))
        print(f"{args.clients} clients on loopback, {args.steps} steps, 1.1M-parameter Llama, "
              f"DisTrO 1-bit; per client per round:")
        for pc in args.per_client:
            r = measure(args, pc, data)
            print(f"  {pc:>3} sequences: round {r['wall']:.2f} s = compute {r['compute']:.2f} s "
                  f"+ waiting {r['wall'] - r['compute']:.2f} s; compute share {r['share']:.1%} "
                  f"({r['rounds']} rounds)", flush=True)


if __name__ == "__main__":
    main()
