"""benchmarks/p2p_nat.py: iroh across NATs against raw TCP on the same path, in network
namespaces (tests/p2p/netlab.py; root needed).

    python -m benchmarks.p2p_nat [--mb 100] [--lossy-mb 10] [--runs 3]

Two home links profiles: shaped to 1 Gbit/s (tbf) without loss, then the same with 50 ms of
delay and 1 % loss each way (the user-space delay line). On each, three homes: A and B behind
endpoint-independent NATs, C behind a symmetric one; the relay and a STUN server (coturn) on the
internet. Pairs: A fetches from B (hole punching: direct) and from C (relayed). Per pair: the
path, time to first byte (a 1-byte blob, connection setup included), and the throughput of an
--mb blob; against raw TCP over the same links in the same run: to B through a port forwarded
on B's router, to C through a TCP relay on the relay's machine and C's forwarded port. On the
shaped link each pair fetches --runs times (a fresh process and connection each, iroh then TCP
back to back) and reports the median ratio with every try's: one try moves by 0.1 or more.

Writes benchmarks/results/p2p_nat.json (headline: pairs, direct_pairs, relayed_pairs,
direct_throughput_vs_tcp and relay_throughput_vs_tcp on the shaped link)."""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.p2p import netlab
from tests.p2p.test_nat import RELAY_PORT, STUN_PORT, start_stun

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "p2p_nat.json"
TCP_PORT, TCP_RELAY_PORT = 5001, 5002
TCP_RELAY = """
import socket, sys, threading
listen, target = sys.argv[1], sys.argv[2]
def pipe(a, b):
    while (d := a.recv(1 << 20)):
        b.sendall(d)
    b.shutdown(socket.SHUT_WR)
host, port = listen.rsplit(":", 1)
thost, tport = target.rsplit(":", 1)
with socket.create_server((host, int(port))) as s:
    print("ready", flush=True)
    while True:
        c, _ = s.accept()
        u = socket.create_connection((thost, int(tport)))
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()
"""


def node(ns, *args, wait=True):
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "benchmarks.p2p_nat_node", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    if not wait:
        return proc, json.loads(proc.stdout.readline())
    out, err = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def profile(name, mb, runs=1, **lab_args):
    print(f"== {name}", flush=True)
    with netlab.Lab(**lab_args) as lab:
        from psyche_client.p2p.relay_server import start_relay
        (a,), (b,), (c,) = lab.home("eim"), lab.home("eim"), lab.home("sym")
        relay_ip = lab.public_address()
        for i, host in ((2, b), (3, c)):
            lab.forward_port(i, TCP_PORT, lab.address(host))
        stun = start_stun(lab, relay_ip)
        tcp_relay = subprocess.Popen(
            ["ip", "netns", "exec", lab.public, sys.executable, "-c", TCP_RELAY,
             f"{relay_ip}:{TCP_RELAY_PORT}", f"10.{lab.net}.3.2:{TCP_PORT}"],
            stdout=subprocess.PIPE, text=True)
        assert tcp_relay.stdout.readline().strip() == "ready"
        pairs, servers = [], []
        try:
            with start_relay(relay_ip, RELAY_PORT, netns=lab.public) as relay:
                common = ["--relay", relay, "--stun", f"{relay_ip}:{STUN_PORT}"]
                for label, host, tcp_addr in (
                        ("A-B (endpoint-independent NATs)", b,
                         f"10.{lab.net}.2.2:{TCP_PORT}"),
                        ("A-C (symmetric NAT)", c, f"{relay_ip}:{TCP_RELAY_PORT}")):
                    srv, info = node(host, "serve", "--seed", os.urandom(32).hex(), *common,
                                     "--mb", str(mb), wait=False)
                    servers.append(srv)
                    tsrv, _ = node(host, "tcp-serve", "--mb", str(mb), wait=False)
                    servers.append(tsrv)
                    tries = []  # (iroh, tcp) back to back, each a fresh process and connection
                    for _ in range(runs):
                        got = node(a, "fetch", "--seed", os.urandom(32).hex(), *common,
                                   "--peer", info["id"], "--blob", info["blob"],
                                   "--small", info["small"])
                        tcp = node(a, "tcp-fetch", "--addr", tcp_addr)
                        assert got["bytes"] == tcp["bytes"] == mb << 20, (got, tcp)
                        tries.append((got, tcp))
                    row = {"pair": label, "path": tries[0][0]["path"]}
                    if any(g["path"] != row["path"] for g, _ in tries):
                        row["paths"] = [g["path"] for g, _ in tries]
                    mbit = lambda r: round(mb * 8 * 1.048576 / r["seconds"], 1)  # noqa: E731
                    ratios = [mbit(g) / mbit(t) for g, t in tries]
                    # the median try by ratio (the upper middle one of an even count): its
                    # figures and its ratio, so the row's numbers are one try's
                    mid = sorted(range(runs), key=ratios.__getitem__)[runs // 2]
                    g, t = tries[mid]
                    row.update({"iroh_ttfb_s": round(g["ttfb_s"], 3),
                                "tcp_ttfb_s": round(t["ttfb_s"], 3),
                                "iroh_mbit_s": mbit(g), "tcp_mbit_s": mbit(t),
                                "throughput_vs_tcp": round(ratios[mid], 3)})
                    if runs > 1:
                        row["throughput_vs_tcp_tries"] = [round(r, 3) for r in ratios]
                    print(json.dumps(row), flush=True)
                    pairs.append(row)
        finally:
            for p in servers + [tcp_relay, stun]:
                p.kill()
                p.wait()
    return pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=100,
                    help="blob size in MiB on the shaped link (default 100)")
    ap.add_argument("--lossy-mb", type=int, default=10,
                    help="blob size in MiB with delay and loss (default 10: a direct QUIC path "
                         "moved under 1 Mbit/s there in the first runs)")
    ap.add_argument("--runs", type=int, default=3,
                    help="fetches of each kind per pair on the shaped link, paired iroh/TCP; the "
                         "median ratio is reported (default 3; the lossy link gets one)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be 1 or more")
    why = netlab.available()
    if why:
        sys.exit(f"p2p_nat: {why}")
    started = time.time()
    shaped = profile("1 Gbit/s, no loss", args.mb, runs=args.runs, rate="1gbit")
    lossy = profile("1 Gbit/s, 50 ms and 1 % loss each way", args.lossy_mb, rate="1gbit",
                    delay_ms=50, loss_pct=1.0)
    direct = [p for p in shaped if p["path"] == "direct"]
    relayed = [p for p in shaped if p["path"] == "relay"]
    result = {
        "headline": {
            "pairs": len(shaped), "direct_pairs": len(direct), "relayed_pairs": len(relayed),
            "direct_throughput_vs_tcp": direct[0]["throughput_vs_tcp"] if direct else None,
            "relay_throughput_vs_tcp": relayed[0]["throughput_vs_tcp"] if relayed else None,
        },
        "blob_mib": args.mb, "lossy_blob_mib": args.lossy_mb, "shaped_runs": args.runs,
        "shaped": shaped, "lossy": lossy,
        "seconds": round(time.time() - started),
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["headline"]))


if __name__ == "__main__":
    main()
