"""One client's p2p transport for the NAT tests, run inside a network namespace:

    python -m tests.p2p.nat_peer --seed HEX --relay URL [--stun HOST:PORT] [--port P]
        [--seconds S] [--known ID@HOST:PORT ...] PEER_ID...

It binds every interface on the port, learns its public address from the STUN server, knows
its peers by key (dialled through the relay) and at the --known addresses, and for S seconds
publishes a signed training result once a second, receiving the others' (forwarded ones
included: p2p/forwarding.py). Then it prints one JSON line: its public address, per peer the
path it used last ("direct", "relay", or null when it never had a connection; seen while both
ran: a peer that stops first closes its connections) and the seconds until its first direct
path, how many results it published, and per trainer how many of its results arrived."""

import argparse
import asyncio
import json
import logging
import os
import time

from psyche_client.client.results import TrainingResult
from psyche_client.identity import Identity
from psyche_client.p2p.transport import IrohTransport
from psyche_coordinator_core import BatchId


async def main(args):
    me = Identity(bytes.fromhex(args.seed))
    received = {}
    known = {}
    for k in args.known:
        pid, _, addr = k.partition("@")
        known.setdefault(pid, []).append(addr)
    transport = IrohTransport(
        me, lambda r: received.__setitem__(r.trainer.hex(), received.get(r.trainer.hex(), 0) + 1),
        "0.0.0.0", args.port, relay_url=args.relay, stun=tuple(args.stun), known_addrs=known)
    await transport.start()
    transport.set_peers({p: None for p in args.peers})
    node = transport.node
    last, first_direct = {p: None for p in args.peers}, {p: None for p in args.peers}
    start = time.monotonic()
    step, sending = 0, set()
    while time.monotonic() < start + args.seconds:
        step += 1
        # not awaited, as the client daemon does: a peer that cannot be reached holds its
        # announcement up to the node's timeout, and the others must not wait for it
        task = asyncio.ensure_future(transport.publish(TrainingResult.create(
            me, step, BatchId(step * 10, step * 10 + 9), os.urandom(2000))))
        sending.add(task)
        task.add_done_callback(sending.discard)
        for p in args.peers:
            kind = node.path_kind(p)
            last[p] = kind or last[p]
            if kind == "direct" and first_direct[p] is None:
                first_direct[p] = round(time.monotonic() - start, 1)
        await asyncio.sleep(1)
    await asyncio.sleep(5)  # the last results still travelling
    print(json.dumps({"id": me.public.hex(), "public": node.public_addr, "paths": last,
                      "direct_after": first_direct, "published": step, "received": received,
                      "forwarded": transport.forwarding.forwarded}), flush=True)
    await transport.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", required=True)
    ap.add_argument("--relay", default=None)
    ap.add_argument("--stun", action="append", default=[])
    ap.add_argument("--port", type=int, default=29400)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--known", action="append", default=[])
    ap.add_argument("peers", nargs="*")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(main(ap.parse_args()))
