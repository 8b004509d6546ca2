"""Applied result sets between real IrohNodes on loopback: a peer serves the sets it keeps, a
syncing client gets them checked, a peer without the set (or excluded) is passed over, and a
forged result is refused."""

import asyncio
import dataclasses
import hashlib
import json

import pytest

pytest.importorskip("iroh")

from psyche_client.client.applied import AppliedSet  # noqa: E402
from psyche_client.client.results import TrainingResult  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.p2p.applied_sharing import (  # noqa: E402
    AppliedSharing,
    fetch_applied,
    fetch_received,
    request_applied,
)
from psyche_client.p2p.errors import RequestError  # noqa: E402
from psyche_client.p2p.iroh_node import IrohNode  # noqa: E402
from psyche_coordinator_core import BatchId  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def result(k, step, start):
    ident = Identity(hashlib.sha256(b"trainer%d" % k).digest())
    return TrainingResult.create(ident, step, BatchId(start, start + 1), b"payload-%d" % k)


def a_set(step):
    return AppliedSet(step, True, (result(0, step, 0), result(1, step, 2)))


async def network(held, received=None):
    """Peers p0.. each serving the sets in held[i] ({step: AppliedSet}) and the results in
    received[i] ({step: [TrainingResult]}), and an asker."""
    received = received or [{} for _ in held]
    nodes = [IrohNode(f"p{i}", timeout=10) for i in range(len(held))]
    sharings = [AppliedSharing(node, sets.get, lambda step, r=r: r.get(step, []))
                for node, sets, r in zip(nodes, held, received)]
    asker = IrohNode("asker", timeout=10)
    addrs = {f"p{i}": await node.start() for i, node in enumerate(nodes)}
    addrs["asker"] = await asker.start()
    for node in nodes + [asker]:
        node.set_peers(addrs)
    return nodes, sharings, asker


def test_a_syncing_client_gets_the_sets_a_peer_keeps():
    async def go():
        nodes, sharings, asker = await network([{}, {7: a_set(7), 8: AppliedSet(8, False, ())}])
        try:
            got, peer = await fetch_applied(asker, ["p0", "p1"], 7, attempts=1)
            assert peer == "p1" and got == a_set(7)
            empty, _ = await fetch_applied(asker, ["p0", "p1"], 8, attempts=1)
            assert empty == AppliedSet(8, False, ())  # empty sets are kept and served too
            assert await fetch_applied(asker, ["p0", "p1"], 9, attempts=2,
                                       retry_delay=0.1) == (None, None)
            assert await fetch_applied(asker, ["p0", "p1"], 7, exclude={"p1"},
                                       attempts=1) == (None, None)
            with pytest.raises(RequestError, match="refused"):
                await asker.request("p1", b"psyche/applied/1", b'{"type": "manifest"}', 1000)
        finally:
            await asyncio.gather(*(n.close() for n in nodes + [asker]))
    asyncio.run(asyncio.wait_for(go(), 60))


def test_a_forged_result_in_a_set_is_refused():
    good = a_set(5)
    forged = dataclasses.replace(good.results[0], payload=b"another payload")

    class Forger:
        def to_json(self):
            return {"step": 5, "trained": True, "results": [forged.to_json()]}

    async def go():
        nodes, _, asker = await network([{5: Forger()}])
        try:
            with pytest.raises(ValueError, match="commitment"):
                await request_applied(asker, "p0", 5)
            assert await fetch_applied(asker, ["p0"], 5, attempts=1) == (None, None)
        finally:
            await asyncio.gather(*(n.close() for n in nodes + [asker]))
    asyncio.run(asyncio.wait_for(go(), 60))


def test_applied_set_json_checks():
    s = a_set(3)
    assert AppliedSet.from_json(json.loads(json.dumps(s.to_json())), 3) == s
    with pytest.raises(ValueError, match="malformed"):
        AppliedSet.from_json(s.to_json(), 4)  # not the step asked for
    twice = dict(s.to_json(), results=[s.results[0].to_json()] * 2)
    with pytest.raises(ValueError, match="twice"):
        AppliedSet.from_json(twice, 3)


def test_a_joiner_gets_the_results_its_peers_received():
    a, b = result(0, 4, 0), result(1, 4, 2)
    forged = dataclasses.replace(result(2, 4, 4), payload=b"changed")

    async def go():
        nodes, _, asker = await network([{}, {}], [{4: [a]}, {4: [a, b, forged]}])
        try:
            got = await fetch_received(asker, ["p0", "p1", "nobody"], 4)
            assert sorted(got, key=lambda r: r.batch) == [a, b]  # merged, forged one left out
            assert await fetch_received(asker, ["p0"], 5) == []
        finally:
            await asyncio.gather(*(n.close() for n in nodes + [asker]))
    asyncio.run(asyncio.wait_for(go(), 60))
