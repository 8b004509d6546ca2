"""Forwarding on loopback: a result reaches a peer its trainer does not know, through a peer
that knows both; it is fetched from another announcer when one fails; a result that does not
check is neither delivered nor forwarded; old result payloads leave the store."""

import asyncio
import os

import pytest

pytest.importorskip("iroh")

from psyche_client.client.results import TrainingResult  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.p2p.blobs import blob_hash  # noqa: E402
from psyche_client.p2p.forwarding import KEEP_STEPS  # noqa: E402
from psyche_client.p2p.iroh_results import result_announcement  # noqa: E402
from psyche_client.p2p.transport import IrohTransport  # noqa: E402
from psyche_coordinator_core import BatchId  # noqa: E402
from tests.p2p.test_iroh import run, until  # noqa: E402

pytestmark = pytest.mark.timeout(120)


async def line(n=3):
    """n transports in a line: each knows only its neighbours. (ids, transports, inboxes)"""
    ids = [Identity.generate() for _ in range(n)]
    inboxes = [[] for _ in range(n)]
    nodes = [IrohTransport(ids[i], on_result=inboxes[i].append) for i in range(n)]
    addrs = [await t.start() for t in nodes]
    for i, t in enumerate(nodes):
        t.set_peers({ids[j].public.hex(): addrs[j] for j in (i - 1, i + 1) if 0 <= j < n})
    return ids, nodes, inboxes


async def closed(nodes):
    await asyncio.gather(*(t.close() for t in nodes))


def fetched_from(transport):
    """Records the peer of every blob fetch the transport's node makes."""
    peers, fetch = [], transport.node.fetch

    async def spy(peer, blob, **kw):
        peers.append(peer)
        return await fetch(peer, blob, **kw)
    transport.node.fetch = spy
    return peers


def test_results_cross_a_peer_that_knows_both_ends():
    async def main():
        ids, (a, b, c), (got_a, got_b, got_c) = await line()
        from_c = fetched_from(c)
        try:
            ra = TrainingResult.create(ids[0], 5, BatchId(0, 9), os.urandom(40_000))
            rc = TrainingResult.create(ids[2], 5, BatchId(10, 19), os.urandom(40_000))
            await a.publish(ra)
            await c.publish(rc)
            await until(lambda: got_c and got_a and len(got_b) == 2)
            assert got_c == [ra] and got_a == [rc] and sorted(got_b, key=lambda r: r.batch.start) \
                == [ra, rc]
            assert from_c == [ids[1].public.hex()]  # A's result came from B, not from A
            # counted once B's announcement was acknowledged, which is just after it arrived
            await until(lambda: b.forwarding.forwarded == 2)
            await asyncio.sleep(0.5)  # nothing arrives twice, nobody takes back its own result
            assert (len(got_a), len(got_b), len(got_c)) == (1, 2, 1)
        finally:
            await closed([a, b, c])
    run(main())


def test_an_announcer_that_fails_is_followed_by_the_next():
    async def main():
        ids, (a, b), (_, got_b) = await line(2)
        try:
            result = TrainingResult.create(ids[0], 2, BatchId(0, 9), os.urandom(1000))
            msg = result_announcement(result, a.node.add(result.payload))
            stranger = Identity.generate().public.hex()  # not a peer: its fetch fails at once
            b.forwarding.on_announcement(dict(msg, **{"from": stranger}))
            b.forwarding.on_announcement(dict(msg, **{"from": ids[0].public.hex()}))
            await until(lambda: got_b)
            assert got_b == [result]
        finally:
            await closed([a, b])
    run(main())


def test_a_result_that_does_not_check_goes_no_further():
    async def main():
        ids, (a, b, c), (_, got_b, got_c) = await line()
        try:
            result = TrainingResult.create(ids[0], 2, BatchId(0, 9), os.urandom(1000))
            msg = result_announcement(result, a.node.add(result.payload))
            await a.node.announce(dict(msg, step=3))  # the signature covers the step
            await asyncio.sleep(1.0)
            assert got_b == [] and got_c == [] and b.forwarding.forwarded == 0
        finally:
            await closed([a, b, c])
    run(main())


def test_old_result_payloads_leave_the_store():
    async def main():
        ids, (a,), _ = await line(1)
        try:
            results = [TrainingResult.create(ids[0], s, BatchId(s * 10, s * 10 + 9),
                                             os.urandom(100)) for s in range(1, 11)]
            for r in results:
                await a.publish(r)
            kept = [r.step for r in results if blob_hash(r.payload) in a.node.store]
            assert kept == list(range(10 - KEEP_STEPS, 11))
        finally:
            await closed([a])
    run(main())
