"""Loopback throughput of a 100 MB blob: iroh with psyche's send fast path, the iroh binding as
generated (per-byte copy), and raw TCP, all in one run and one process.

    . ~/.cache/psyche/venv/bin/activate
    python benchmarks/iroh_throughput.py                  # about 40 s, most of it the naive path
    python benchmarks/iroh_throughput.py --naive-mb 10    # quicker: the naive path on 10 MB
    python benchmarks/iroh_throughput.py --mb 100 --repeat 5

Measured, each on a fresh pair of endpoints / sockets, sender and receiver in this process:

- raw TCP: asyncio streams on 127.0.0.1, one write of the whole buffer, reads of 1 MiB.
- iroh stream, fast: one QUIC bi stream, write_all in 1 MiB chunks, read_exact in 1 MiB chunks,
  timed until the receiver has every byte.
- iroh blob fetch, fast: IrohNode.fetch of a stored blob (request, size header, 1 MiB chunks,
  SHA-256 verification of the whole blob): what a client fetching a result payload sees.
- iroh blob fetch, naive: the same with iroh_fastpath.disabled(), i.e. the generated
  `_UniffiRustBufferBuilder.write` copying one byte per Python iteration (on --naive-mb).
- lowering only: the time to copy the buffer into a Rust buffer (no network), both ways.

MB are 10^6 bytes. The fast runs are repeated --repeat times; best and median are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import iroh  # noqa: E402
from iroh import iroh_ffi  # noqa: E402

from psyche_client.p2p import iroh_fastpath  # noqa: E402
from psyche_client.p2p.blobs import CHUNK  # noqa: E402
from psyche_client.p2p.iroh_node import IrohNode  # noqa: E402

ALPN = b"psyche/bench/1"


async def raw_tcp(data: bytes) -> float:
    got = asyncio.get_running_loop().create_future()

    async def handle(reader, writer):
        n = 0
        while chunk := await reader.read(CHUNK):
            n += len(chunk)
        got.set_result(n)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    t = time.perf_counter()
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    writer.close()
    assert await got == len(data)
    dt = time.perf_counter() - t
    server.close()
    await server.wait_closed()
    return dt


async def iroh_stream(data: bytes) -> float:
    """Bare QUIC stream: no protocol, no hashing."""
    def opts():
        return iroh.EndpointOptions(preset=iroh.preset_minimal(), bind_addr="127.0.0.1:0",
                                    alpns=[ALPN], relay_mode=iroh.RelayMode.disabled())
    a, b = await iroh.Endpoint.bind(opts()), await iroh.Endpoint.bind(opts())

    async def receive():
        conn = await (await (await a.accept_next()).accept()).connect()
        recv = (await conn.accept_bi()).recv()
        n = 0
        while n < len(data):
            n += len(await recv.read_exact(min(CHUNK, len(data) - n)))
        return conn

    receiver = asyncio.ensure_future(receive())
    conn = await b.connect(a.addr(), ALPN)
    t = time.perf_counter()
    send = (await conn.open_bi()).send()
    view = memoryview(data)
    for off in range(0, len(data), CHUNK):
        await send.write_all(view[off:off + CHUNK])
    await send.finish()
    server_conn = await receiver
    dt = time.perf_counter() - t
    conn.close(0, b"done")
    server_conn.close(0, b"done")
    for e in (a, b):
        await asyncio.wait_for(e.close(), 2)
    return dt


async def blob_fetch(data: bytes) -> float:
    a, b = IrohNode("a", timeout=600), IrohNode("b", timeout=600)
    peers = {"a": await a.start(), "b": await b.start()}
    a.set_peers(peers)
    h = b.add(data)
    t = time.perf_counter()
    assert await a.fetch("b", h, max_size=len(data)) == data
    dt = time.perf_counter() - t
    await a.close()
    await b.close()
    return dt


def lowering(data: bytes) -> float:
    t = time.perf_counter()
    iroh_ffi._UniffiFfiConverterBytes.lower(data).free()
    return time.perf_counter() - t


def mbps(n: int, dt: float) -> float:
    return n / 1e6 / dt


async def main(args):
    size, naive_size = args.mb * 1_000_000, args.naive_mb * 1_000_000
    data = os.urandom(size)
    assert iroh_fastpath.is_active()
    rows = {}

    async def fast(name, fn):
        rates = []
        for _ in range(args.repeat):
            rates.append(mbps(size, await fn(data)))
        rows[name] = (size, max(rates), statistics.median(rates))
        print(f"  {name}: " + ", ".join(f"{r:.0f}" for r in rates) + " MB/s", flush=True)

    await fast("raw TCP (asyncio)", raw_tcp)
    await fast("iroh stream, fast path", iroh_stream)
    await fast("iroh blob fetch, fast path", blob_fetch)
    naive = data[:naive_size]
    with iroh_fastpath.disabled():
        r = mbps(naive_size, await blob_fetch(naive))
    rows["iroh blob fetch, naive binding"] = (naive_size, r, r)
    print(f"  iroh blob fetch, naive binding: {r:.1f} MB/s", flush=True)
    low_fast = mbps(size, min(lowering(data) for _ in range(3)))
    low_n = min(size, 4_000_000)
    with iroh_fastpath.disabled():
        low_naive = mbps(low_n, lowering(data[:low_n]))

    tcp = rows["raw TCP (asyncio)"][1]
    fetch_naive = rows["iroh blob fetch, naive binding"][1]
    print(f"\nloopback, {args.mb} MB blob (naive path on {args.naive_mb} MB), best of "
          f"{args.repeat} for the fast paths; os.cpu_count()={os.cpu_count()}, "
          f"loadavg {os.getloadavg()[0]:.2f}\n")
    print("| path | MB moved | MB/s (best) | MB/s (median) | vs raw TCP | vs naive |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (n, best, med) in rows.items():
        print(f"| {name} | {n / 1e6:.0f} | {best:.1f} | {med:.1f} | {best / tcp:.2f} | "
              f"{best / fetch_naive:.1f}x |")
    print(f"\nlowering a bytes argument into a Rust buffer (no network): fast path "
          f"{low_fast:.0f} MB/s, generated per-byte copy {low_naive:.2f} MB/s "
          f"({low_fast / low_naive:.0f}x)")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=100, help="blob size in MB (default 100)")
    p.add_argument("--naive-mb", type=int, default=100,
                   help="blob size for the naive path (default 100; it moves at ~5 MB/s)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each fast path (default 3)")
    args = p.parse_args()
    args.naive_mb = min(args.naive_mb, args.mb)
    asyncio.run(main(args))
