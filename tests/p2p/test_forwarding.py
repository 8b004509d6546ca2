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
    """By arrival time and a byte budget, not by the step a result claims (a signed result for
    a far future step must not push the others out)."""
    async def main():
        ids, (a,), _ = await line(1)
        now = [0.0]
        fwd = a.forwarding
        fwd._clock, fwd.keep_seconds, fwd.keep_bytes = (lambda: now[0]), 100.0, 1000
        try:
            def result(step, size=100):
                return TrainingResult.create(ids[0], step, BatchId(step * 10, step * 10 + 9),
                                             os.urandom(size))
            old = result(1)
            await a.publish(old)
            now[0] = 50.0
            future = result(10**9)
            await a.publish(future)
            assert blob_hash(old.payload) in a.node.store  # the far step pushed nothing out
            now[0] = 120.0
            recent = result(2)
            await a.publish(recent)
            assert blob_hash(old.payload) not in a.node.store  # 120 s old
            assert blob_hash(future.payload) in a.node.store
            big = result(3, size=950)
            await a.publish(big)  # over 1000 bytes kept: the oldest go first
            assert [blob_hash(r.payload) in a.node.store for r in (future, recent, big)] == \
                [False, False, True]
        finally:
            await closed([a])
    run(main())


def test_a_result_from_a_peer_not_yet_listed_is_fetched_once_it_is():
    """The peer list lags behind who is up (clients reconnecting to a restarted coordinator):
    a result announced by a peer this node does not list yet is fetched once the list has it,
    not given up at once."""
    async def main():
        ids = [Identity.generate() for _ in range(2)]
        got = [[], []]
        a, b = (IrohTransport(ids[i], on_result=got[i].append) for i in range(2))
        addrs = [await a.start(), await b.start()]
        try:
            a.set_peers({ids[1].public.hex(): addrs[1]})  # b does not list a yet
            result = TrainingResult.create(ids[0], 3, BatchId(0, 9), os.urandom(10_000))
            await a.publish(result)
            await asyncio.sleep(1)
            assert got[1] == []
            b.set_peers({ids[0].public.hex(): addrs[0]})
            await until(lambda: got[1] == [result], timeout=15)
        finally:
            await closed([a, b])
    run(main())
