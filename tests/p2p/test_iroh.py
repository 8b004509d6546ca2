"""iroh transport on loopback: the send fast path, announcements, blobs, training results."""

import asyncio
import os
import time

import pytest

pytest.importorskip("iroh")

from psyche_client.client.results import TrainingResult  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.p2p import iroh_fastpath, iroh_node  # noqa: E402
from psyche_client.p2p.blobs import blob_hash  # noqa: E402
from psyche_client.p2p.errors import (  # noqa: E402
    BlobError,
    BlobHashMismatch,
    BlobNotFound,
    BlobTooLarge,
    P2PError,
    ProtocolMismatch,
    RequestError,
)
from psyche_client.p2p.iroh_node import IrohNode  # noqa: E402
from psyche_client.p2p.iroh_results import fetch_result, publish_result  # noqa: E402
from psyche_client.p2p.transport import IrohTransport  # noqa: E402
from psyche_coordinator_core import BatchId  # noqa: E402

pytestmark = pytest.mark.timeout(120)
SLACK = 8  # seconds a loaded machine may add to a timeout that a call must keep


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def started(n, timeout=10, **kw):
    """n nodes on loopback that all know each other; per-node announcement inboxes. The node
    timeout bounds every exchange: generous, so that a loaded machine fails nothing; a test that
    measures how long a dead peer holds a call up lowers it for that call."""
    inboxes = [[] for _ in range(n)]
    nodes = [IrohNode(f"p{i}", on_announcement=inboxes[i].append, timeout=timeout, **kw)
             for i in range(n)]
    addrs = {f"p{i}": await node.start() for i, node in enumerate(nodes)}
    for node in nodes:
        node.set_peers(addrs)
    return nodes, inboxes


async def closed(nodes):
    await asyncio.gather(*(n.close() for n in nodes))


async def until(pred, timeout=30.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out waiting"
        await asyncio.sleep(0.01)


def test_fast_send_path_is_active_and_lossless():
    from iroh import iroh_ffi
    assert iroh_fastpath.is_active()
    conv = iroh_ffi._UniffiFfiConverterBytes
    data = os.urandom(3 << 20) + bytes(range(256))
    for value in (data, bytearray(data), memoryview(data)[7:-7], b""):
        assert conv.lift(conv.lower(value)) == bytes(value)
    small = data[:256_000]

    def lowering_time():
        t = time.perf_counter()
        conv.lower(small).free()
        return time.perf_counter() - t

    fast = min(lowering_time() for _ in range(3))
    with iroh_fastpath.disabled():  # the generated per-byte copy: same bytes, far slower
        assert not iroh_fastpath.is_active()
        assert conv.lift(conv.lower(small)) == small
        slow = lowering_time()
    assert iroh_fastpath.is_active()
    assert slow > 10 * fast, (slow, fast)  # measured: ~60 ms against ~0.2 ms


def test_fast_path_refuses_other_versions(monkeypatch):
    import importlib.metadata
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.3.0")
    with pytest.raises(iroh_fastpath.IrohFastPathError, match="pinned to iroh==1.2.0"):
        iroh_fastpath.install()


def test_three_nodes_exchange_announcements():
    async def main():
        nodes, inboxes = await started(3)
        try:
            for node in nodes:
                assert node.addr().startswith("endpoint")
                assert node.endpoint.bound_sockets()[0].startswith("127.0.0.1:")
                sockets = node.endpoint.bound_sockets()
                assert all(s.startswith(("127.0.0.1:", "[::1]:")) for s in sockets)
            assert await nodes[0].announce({"type": "hello", "n": 0}) == 2
            assert await nodes[2].broadcast({"type": "hello", "n": 2}) == 2  # PeerMesh's name
            await until(lambda: sum(map(len, inboxes)) == 4)
            assert inboxes[0] == [{"type": "hello", "n": 2, "from": nodes[2].endpoint_id}]
            assert sorted((m["n"], m["from"]) for m in inboxes[1]) == [
                (0, nodes[0].endpoint_id), (2, nodes[2].endpoint_id)]
            assert [m["n"] for m in inboxes[2]] == [0]
            # a peer that went away is not counted, and holds the announcement up to the timeout
            # (then no longer than that, give or take a loaded machine; QUIC alone would wait ~35 s)
            await nodes[1].close()
            nodes[0].timeout = 2
            t = time.monotonic()
            assert await nodes[0].announce({"type": "hello", "n": 3}) == 1
            assert time.monotonic() - t < 2 + SLACK
            await until(lambda: len(inboxes[2]) == 2)
        finally:
            await closed(nodes)
    run(main())


def test_an_announcement_a_peer_missed_reaches_it_once_it_is_up():
    """A peer known by key and address but not listening yet (a client that starts later, a
    path not up) gets what was announced while it was away, in order, once it is up; what
    waited longer than retry_for is dropped."""
    import socket

    async def main():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        key = Identity(os.urandom(32))
        b_id = key.public.hex()
        a = IrohNode("a", timeout=1, known_addrs={b_id: [f"127.0.0.1:{port}"]}, retry_for=6)
        inbox = []
        b = IrohNode(b_id, on_announcement=inbox.append, port=port,
                     secret_key=bytes(key._key), timeout=10)
        try:
            await a.start()
            a.set_peers({b_id: None})
            assert await a.announce({"n": 0}) == 0  # nobody listens there yet
            assert await a.announce({"n": 1}) == 0  # queued behind n=0, not tried on its own
            assert len(a._outbox[b.own]) == 2
            await b.start()
            await until(lambda: len(inbox) == 2)
            assert [m["n"] for m in inbox] == [0, 1]
            await until(lambda: b.own not in a._outbox)  # acknowledged: the retry loop ended
            assert await a.announce({"n": 2}) == 1  # straight to it again
            await b.close()
            assert await a.announce({"n": 3}) == 0
            await asyncio.sleep(6 + 1)  # past retry_for: dropped, and the loop ends
            await until(lambda: b.own not in a._outbox)
        finally:
            await a.close()
            await b.close()
        assert [m["n"] for m in inbox] == [0, 1, 2]
    run(main())


def test_a_peer_put_back_on_the_list_gets_what_was_announced_while_it_was_off():
    """A coordinator that restarts lists its clients as they reconnect: for a moment a peer is
    off the list, and an announcement made then reached nobody (a result never delivered, its
    trainer marked unhealthy). Back on the list, the peer gets the announcements of the last
    retry_for seconds (not those it was excluded from), once; the others get nothing twice."""
    async def main():
        nodes, inboxes = await started(3, retry_for=30)
        addrs = {f"p{i}": n.peers.get(f"p{i}") or n.addr() for i, n in enumerate(nodes)}
        try:
            nodes[0].set_peers({"p0": addrs["p0"], "p2": addrs["p2"]})  # p1 off the list
            assert await nodes[0].announce({"n": 0}) == 1
            assert await nodes[0].announce({"n": 1}, exclude={"p1"}) == 1
            assert await nodes[0].announce({"n": 2}) == 1
            await until(lambda: len(inboxes[2]) == 3)
            assert inboxes[1] == []
            nodes[0].set_peers(addrs)  # p1 is back
            await until(lambda: len(inboxes[1]) == 2)
            await until(lambda: not nodes[0]._outbox)  # acknowledged: the retry loop ended
            assert await nodes[0].announce({"n": 3}) == 2
            await until(lambda: len(inboxes[1]) == 3 and len(inboxes[2]) == 4)
            await asyncio.sleep(1)
            assert [m["n"] for m in inboxes[1]] == [0, 2, 3]
            assert [m["n"] for m in inboxes[2]] == [0, 1, 2, 3]
        finally:
            await closed(nodes)
    run(main())


def test_blob_fetch_verify_and_errors():
    async def main():
        nodes, _ = await started(2, max_blob_size=1 << 20)
        a, b = nodes
        try:
            data = os.urandom(300_000)
            h = b.add(data)
            assert h == blob_hash(data) and len(h) == 64
            assert await a.fetch("p1", h) == data  # by p2p id
            assert await a.fetch(b.endpoint_id, h) == data  # by endpoint id
            assert await a.fetch(b.addr(), h) == data  # by ticket
            with pytest.raises(BlobNotFound):
                await a.fetch("p1", blob_hash(b"never stored"))
            # the peer serves other bytes under that hash: rejected
            b.store._blobs[h] = data[:-1] + bytes([data[-1] ^ 1])
            with pytest.raises(BlobHashMismatch):
                await a.fetch("p1", h)
            big = b.add(os.urandom((1 << 20) + 1))
            with pytest.raises(BlobTooLarge):
                await a.fetch("p1", big)  # over the node's limit
            small = b.add(data[:1000])
            with pytest.raises(BlobTooLarge):
                await a.fetch("p1", small, max_size=999)  # over the caller's limit
            assert await a.fetch("p1", small, max_size=1000) == data[:1000]
            with pytest.raises(BlobError):
                await a.fetch("p1", "not a hash")
            with pytest.raises(P2PError):
                await a.fetch("nobody", h)
            assert await a.fetch("p1", b.add(b"")) == b""
        finally:
            await closed(nodes)
    run(main())


def test_a_peer_on_another_protocol_version_is_refused_by_name(monkeypatch):
    """Each protocol's ALPN ends in its version: a peer of a release that speaks another one
    fails the handshake, and the caller gets ProtocolMismatch (a BlobError and a RequestError,
    so callers that move on to another peer do) naming the protocol."""
    async def main():
        a = IrohNode("pa", timeout=10)
        b = IrohNode("pb", timeout=10)
        b.serve(b"psyche/test/2", lambda request, peer: b"ok", 64)
        addr_a = await a.start()
        monkeypatch.setattr(iroh_node, "BLOB_ALPN", b"psyche/blob/2")  # b's release
        addr_b = await b.start()
        monkeypatch.undo()
        try:
            a.set_peers({"pb": addr_b})
            b.set_peers({"pa": addr_a})
            h = b.add(b"x" * 100)
            with pytest.raises(ProtocolMismatch, match="does not speak psyche/blob/1") as e:
                await a.fetch("pb", h)
            assert isinstance(e.value, BlobError)
            with pytest.raises(ProtocolMismatch, match="psyche/test/1") as e:
                await a.request("pb", b"psyche/test/1", b"hi", 64)
            assert isinstance(e.value, RequestError)
            assert await a.request("pb", b"psyche/test/2", b"hi", 64) == b"ok"
        finally:
            await closed([a, b])
    run(main())


def test_fetch_from_a_gone_peer_fails_cleanly():
    async def main():
        nodes, _ = await started(2)
        a, b = nodes
        h = b.add(b"x" * 1000)
        await b.close()
        t = time.monotonic()
        try:
            with pytest.raises(BlobError):
                await a.fetch("p1", h, timeout=1)
            assert time.monotonic() - t < 1 + SLACK
        finally:
            await a.close()
    run(main())


def test_large_blob_moves_fast():
    async def main():
        nodes, _ = await started(2)
        a, b = nodes
        try:
            data = os.urandom(32 << 20)
            h = b.add(data)
            t = time.perf_counter()
            assert await a.fetch("p1", h, timeout=20) == data
            rate = len(data) / 1e6 / (time.perf_counter() - t)
            # the generated per-byte copy manages ~5 MB/s; leave room for a busy machine
            assert rate > 20, f"{rate:.1f} MB/s"
        finally:
            await closed(nodes)
    run(main())


def test_training_result_announced_and_fetched():
    async def main():
        ids = [Identity.generate() for _ in range(2)]
        inbox = []
        a = IrohNode(ids[0].public.hex(), secret_key=bytes(ids[0]._key), timeout=10)
        b = IrohNode(ids[1].public.hex(), on_announcement=inbox.append,
                     secret_key=bytes(ids[1]._key), timeout=10)
        try:
            peers = {ids[0].public.hex(): await a.start(), ids[1].public.hex(): await b.start()}
            assert a.endpoint_id == ids[0].public.hex()  # transport id == signing identity
            a.set_peers(peers)
            b.set_peers(peers)
            result = TrainingResult.create(ids[0], 3, BatchId(10, 19), os.urandom(50_000))
            assert await publish_result(a, result) == 1
            await until(lambda: inbox)
            msg = inbox[0]
            assert msg["from"] == ids[0].public.hex() and "payload" not in msg
            assert await fetch_result(b, msg) == result
            forged = dict(msg, step=4)  # the signature covers the step
            with pytest.raises(ValueError, match="commitment"):
                await fetch_result(b, forged)
            with pytest.raises(ValueError):
                await fetch_result(b, dict(msg, size=10**12))
        finally:
            await closed([a, b])
    run(main())


def test_transport_never_downloads_a_result_over_its_limit():
    """The daemon sets the run's payload bound as the transport's max_result_bytes: a result
    announced over it is dropped before its blob is asked for; one at the bound is delivered.
    And a peer whose blob is larger than it announced is cut off when it says the blob's size,
    before any of it is read."""
    async def main():
        ids = [Identity.generate() for _ in range(2)]
        got = []
        a = IrohTransport(ids[0], on_result=None)
        b = IrohTransport(ids[1], on_result=got.append)
        b.max_result_bytes = 10_000
        asked = []
        fetch = b.node.fetch

        async def counting(peer, blob, **kw):
            asked.append(blob)
            return await fetch(peer, blob, **kw)

        b.node.fetch = counting
        try:
            peers = {ids[0].public.hex(): await a.start(), ids[1].public.hex(): await b.start()}
            a.set_peers(peers)
            b.set_peers(peers)
            over = TrainingResult.create(ids[0], 3, BatchId(10, 19), os.urandom(10_001))
            at = TrainingResult.create(ids[0], 4, BatchId(20, 29), os.urandom(10_000))
            await a.publish(over)
            await a.publish(at)
            await until(lambda: got and not b.forwarding._tasks)
            assert got == [at] and asked == [blob_hash(at.payload)]
            # an announcement that lies about the size: refused as soon as the peer says it
            lie = {"type": "result_available", "step": 3, "batch": [10, 19],
                   "trainer": ids[0].public.hex(), "commitment": over.commitment.hex(),
                   "signature": over.signature.hex(), "blob": blob_hash(over.payload),
                   "size": 10_000, "from": ids[0].public.hex()}
            with pytest.raises(BlobTooLarge):
                await fetch_result(b.node, lie, max_size=b.max_result_bytes)
        finally:
            await a.close()
            await b.close()
    run(main())


def test_fast_path_refuses_modified_bindings(monkeypatch):
    monkeypatch.setitem(iroh_fastpath._FINGERPRINTS, "_UniffiRustBufferBuilder", "0" * 64)
    with pytest.raises(iroh_fastpath.IrohFastPathError, match="refusing to patch"):
        iroh_fastpath.install()


def test_malformed_announcements_are_dropped():
    async def main():
        from psyche_client.p2p.iroh_node import ANNOUNCE_ALPN, MAX_ANNOUNCEMENT
        nodes, inboxes = await started(2)
        a, b = nodes
        try:
            conn, _ = await a._connection(a._resolve("p1"), ANNOUNCE_ALPN)
            for raw in (b"not json", b"[1, 2]", b"x" * (MAX_ANNOUNCEMENT + 1)):
                s = await conn.open_uni()
                await s.write_all(raw)
                await s.finish()
            with pytest.raises(P2PError):
                await a.announce({"pad": "x" * MAX_ANNOUNCEMENT})
            assert await a.announce({"ok": True, "from": "forged"}) == 1
            await until(lambda: inboxes[1])
            await asyncio.sleep(0.1)
            assert inboxes[1] == [{"ok": True, "from": a.endpoint_id}]
        finally:
            await closed(nodes)
    run(main())


def test_set_peers_skips_self_and_bad_tickets():
    async def main():
        nodes, _ = await started(2)
        a, b = nodes
        try:
            a.set_peers({"p0": a.addr(), "me-again": a.addr(), "p1": b.addr(), "junk": "nope",
                         "empty": ""})
            assert list(a.peers) == ["p1"]
            assert await a.announce({"n": 1}) == 1
        finally:
            await closed(nodes)
    run(main())


def test_a_ticket_without_a_relay_gets_the_runs_relay():
    """A client does not wait for the relay before it gives out its ticket (one cut off from
    the relay would wait the whole timeout), so a ticket may name no relay: a peer that has the
    run's relay dials through that one too, beside the ticket's direct addresses."""
    async def main():
        nodes, _ = await started(1)
        ticket = nodes[0].addr()
        try:
            assert iroh_node.parse_addr(ticket).relay_url() is None
            a = IrohNode("a", relay_url="http://10.0.0.1:3340")  # the run's relay
            a.set_peers({"p0": ticket})
            dialled = a._resolve("p0")
            assert dialled.relay_url() == "http://10.0.0.1:3340"
            assert dialled.direct_addresses() == iroh_node.parse_addr(ticket).direct_addresses()
        finally:
            await closed(nodes)
    run(main())


def test_an_oversized_blob_request_is_answered_at_once():
    async def main():
        from psyche_client.p2p.blobs import BLOB_ALPN
        nodes, _ = await started(2)
        a, b = nodes
        try:
            conn, _ = await a._connection(a._resolve("p1"), BLOB_ALPN)
            bi = await conn.open_bi()
            await bi.send().write_all(b"x" * 100)  # a hash is 32 bytes
            await bi.send().finish()
            # at once: well before b's timeout, which a request read to its end would wait for
            assert await asyncio.wait_for(bi.recv().read_to_end(10), 5) == bytes([2])
            h = b.add(b"still serving")
            assert await a.fetch("p1", h) == b"still serving"
        finally:
            await closed(nodes)
    run(main())


RESTARTABLE_PEER = """
import asyncio, sys
from psyche_client.p2p.iroh_node import IrohNode

async def main():
    node = IrohNode("b", secret_key=bytes(range(32)), timeout=30)
    print(await node.start(), node.add(b"from b" * 100), flush=True)
    ticket, blob = sys.stdin.readline().split()
    node.set_peers({"a": ticket})
    await node.fetch("a", blob)  # connections from this process to the test's node
    await node.announce({"hello": 1})
    print("ready", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


# a generous deadline for each fetch, still far below the ~35 s that a connection left open
# to the old process costs (QUIC's idle timeout): a missed close fails, a loaded machine does not
REACHABLE = 15


@pytest.mark.timeout(180)  # two peer processes start: slow on a loaded machine
@pytest.mark.parametrize("left_first", [True, False])
def test_a_peer_restarted_with_the_same_key_is_reachable_again(left_first):
    """A client killed and restarted keeps its key (endpoint id) but not its sockets. Connections
    with the old process, including the ones it opened to us, must go when its ticket leaves
    or changes: while one is open, iroh cannot dial the new process (every dial timed out
    until QUIC's idle timeout, ~35 s)."""
    import subprocess
    import sys

    async def main():
        a = IrohNode("a", timeout=REACHABLE)
        mine = a.add(b"from a")
        ticket = await a.start()
        loop = asyncio.get_running_loop()

        async def peer():
            p = subprocess.Popen([sys.executable, "-c", RESTARTABLE_PEER], text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            their_ticket, blob = (await loop.run_in_executor(None, p.stdout.readline)).split()
            p.stdin.write(f"{ticket} {mine}\n")
            p.stdin.flush()
            return p, their_ticket, blob

        procs = []
        try:
            p, t1, blob = await peer()
            procs.append(p)
            a.set_peers({"b": t1})
            assert await a.fetch("b", blob) == b"from b" * 100
            assert (await loop.run_in_executor(None, p.stdout.readline)).strip() == "ready"
            p.kill()
            p.wait()
            if left_first:  # the server's peer list drops it, then lists the new process
                a.set_peers({})
            p, t2, blob = await peer()
            procs.append(p)
            assert t2 != t1
            a.set_peers({"b": t2})
            assert await a.fetch("b", blob) == b"from b" * 100
        finally:
            for p in procs:
                p.kill()
                p.wait()
            await a.close()
    run(main(), timeout=150)
