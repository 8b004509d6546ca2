"""One end of a benchmarks/p2p_nat measurement, run inside a network namespace.

    python -m benchmarks.p2p_nat_node serve --seed HEX --relay URL --stun H:P --mb N
    python -m benchmarks.p2p_nat_node fetch --seed HEX --relay URL --stun H:P --peer ID
        --blob HASH --small HASH
    python -m benchmarks.p2p_nat_node tcp-serve --port P --mb N
    python -m benchmarks.p2p_nat_node tcp-fetch --addr HOST:PORT

`serve` binds port 29400 on every interface, learns its public address (STUN), holds a blob of
N MB and a 1-byte one, prints {"id", "blob", "small"} and waits. `fetch` knows the server by key
(relay) only: it fetches the small blob (time to first byte: connection setup included), waits
until the path has settled, fetches the big one, and prints {"path", "ttfb_s", "seconds",
"bytes"}. The TCP pair sends N MB over one connection: {"ttfb_s", "seconds", "bytes"}."""

import argparse
import asyncio
import json
import random
import socket
import sys
import time

from psyche_client.p2p.iroh_node import IrohNode

PORT = 29400


def node(args, **kw):
    return IrohNode(None, None, "0.0.0.0", PORT, secret_key=bytes.fromhex(args.seed),
                    relay_url=args.relay, stun=(args.stun,), timeout=120,
                    max_blob_size=2 << 30, **kw)


async def serve(args):
    n = node(args)
    await n.start()
    blob = n.add(random.Random(1).randbytes(args.mb << 20))
    small = n.add(b"x")
    print(json.dumps({"id": n.endpoint_id, "blob": blob, "small": small}), flush=True)
    await asyncio.Event().wait()


async def fetch(args):
    n = node(args)
    await n.start()
    n.set_peers({args.peer: None})
    t0 = time.monotonic()
    await n.fetch(args.peer, args.small)
    ttfb = time.monotonic() - t0
    # let hole punching settle: direct within seconds where it works
    for _ in range(20):
        if n.path_kind(args.peer) == "direct":
            break
        await asyncio.sleep(0.5)
    path = n.path_kind(args.peer)
    t0 = time.monotonic()
    data = await n.fetch(args.peer, args.blob, timeout=600)
    took = time.monotonic() - t0
    print(json.dumps({"path": path, "ttfb_s": ttfb, "seconds": took, "bytes": len(data)}),
          flush=True)
    await n.close()


def tcp_serve(args):
    data = random.Random(1).randbytes(args.mb << 20)
    with socket.create_server(("0.0.0.0", args.port)) as s:
        print(json.dumps({"listening": args.port}), flush=True)
        while True:
            conn, _ = s.accept()
            with conn:
                conn.sendall(data)


def tcp_fetch(args):
    host, port = args.addr.rsplit(":", 1)
    t0 = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=600) as c:
        first = c.recv(1 << 16)
        ttfb = time.monotonic() - t0
        got, t1 = len(first), time.monotonic()
        while True:
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
    took = time.monotonic() - t0
    print(json.dumps({"ttfb_s": ttfb, "seconds": took, "bytes": got,
                      "after_first_s": time.monotonic() - t1}), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["serve", "fetch", "tcp-serve", "tcp-fetch"])
    for flag in ("--seed", "--relay", "--stun", "--peer", "--blob", "--small", "--addr"):
        ap.add_argument(flag)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--port", type=int, default=5001)
    a = ap.parse_args()
    if a.mode == "tcp-serve":
        tcp_serve(a)
    elif a.mode == "tcp-fetch":
        tcp_fetch(a)
    else:
        asyncio.run({"serve": serve, "fetch": fetch}[a.mode](a))
    sys.exit(0)
