"""One iroh node for the NAT tests, run inside a network namespace:

    python -m tests.p2p.nat_peer SEED_HEX RELAY_URL STUN PORT SECONDS PEER_ID...

It binds every interface on PORT, learns its public address from the STUN server ("-": none),
knows its peers by key alone (dialled through the relay), and for SECONDS announces a blob to
them once a second and fetches theirs. Then it prints one JSON line: its public address, per
peer the path it used last ("direct", "relay", or null when it never had a connection; the
last one seen while both ran: a peer that stops first closes its connections) and the seconds
until its first direct path (null: none), and how many of the peer's blobs it fetched."""

import asyncio
import json
import sys
import time

from psyche_client.p2p.iroh_node import IrohNode


async def main(seed, relay, stun, port, seconds, peers):
    inbox = []
    node = IrohNode(None, inbox.append, "0.0.0.0", port, secret_key=bytes.fromhex(seed),
                    relay_url=relay, stun=() if stun == "-" else (stun,), timeout=10)
    await node.start()
    node.set_peers({p: None for p in peers})
    blob = node.add(node.endpoint_id.encode() * 300)  # ~20 KB
    fetched = {p: 0 for p in peers}
    last, first_direct = {p: None for p in peers}, {p: None for p in peers}
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        await node.announce({"type": "hello", "blob": blob})
        for p in peers:
            kind = node.path_kind(p)
            last[p] = kind or last[p]
            if kind == "direct" and first_direct[p] is None:
                first_direct[p] = round(time.monotonic() - start, 1)
        for msg in inbox[:]:
            inbox.remove(msg)
            if time.monotonic() > end:
                break
            try:
                await node.fetch(msg["from"], msg["blob"])
                fetched[msg["from"]] = fetched.get(msg["from"], 0) + 1
            except Exception as e:  # noqa: BLE001 - counted as not fetched
                print(f"fetch from {msg['from'][:8]} failed: {e}", file=sys.stderr)
        await asyncio.sleep(1)
    print(json.dumps({"id": node.endpoint_id, "public": node.public_addr, "paths": last,
                      "direct_after": first_direct, "fetched": fetched}), flush=True)
    await node.close()


if __name__ == "__main__":
    seed, relay, stun, port, seconds, *peers = sys.argv[1:]
    asyncio.run(main(seed, relay, stun, int(port), float(seconds), peers))
