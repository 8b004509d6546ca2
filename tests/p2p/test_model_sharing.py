"""P2P model sharing on loopback with real IrohNodes: a joiner takes the snapshot most peers
offer, outvotes a tampered one, rejects bytes that do not match their hash, and every bad or
unanswerable request gets a clear answer without harming the serving node."""

import asyncio
import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("iroh")
torch = pytest.importorskip("torch")

from psyche_client.data.token_files import write_tokens  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.p2p import model_sharing  # noqa: E402
from psyche_client.p2p.blobs import blob_hash  # noqa: E402
from psyche_client.p2p.errors import BadRequest, ModelSharingError, RequestError  # noqa: E402
from psyche_client.p2p.iroh_node import IrohNode  # noqa: E402
from psyche_client.p2p.model_sharing import (  # noqa: E402
    MAX_REQUEST,
    MODEL_ALPN,
    ModelManifest,
    ModelSharing,
    choose_majority,
    fetch_model,
    request_manifest,
)
from psyche_client.training.errors import ModelUnavailable  # noqa: E402
from psyche_client.training.model import build_model, parameter_hash  # noqa: E402
from psyche_client.training.snapshot import encode_snapshot, layout_of, size_limit  # noqa: E402
from psyche_client.training.spec import ModelSpec, RunSpec  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402
from psyche_coordinator_core import Checkpoint, CheckpointKind  # noqa: E402

pytestmark = pytest.mark.timeout(180)
SPEC = ModelSpec(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                 intermediate_size=128, max_seq_len=32)
SEED, STEP = 1234, 17


def run(coro, timeout=120):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def trained_model(delta=0.01):
    """The seeded model moved away from the seed, as an epoch of training would."""
    model = build_model(SPEC, SEED)
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.add_(delta * (i + 1))
    return model


def offer(sharing, model, step=STEP):
    layout, count = layout_of(model)
    return sharing.offer(encode_snapshot(model), step, parameter_hash(model), layout, count)


async def network(n):
    """n serving nodes p0..p{n-1} with model sharing, and a joiner that knows them all."""
    servers = [IrohNode(f"p{i}", timeout=10) for i in range(n)]
    sharings = [ModelSharing(node) for node in servers]
    joiner = IrohNode("joiner", timeout=10)
    ModelSharing(joiner)  # joiners serve too (nothing, until their first cooldown)
    addrs = {f"p{i}": await node.start() for i, node in enumerate(servers)}
    addrs["joiner"] = await joiner.start()
    for node in servers + [joiner]:
        node.set_peers(addrs)
    return servers, sharings, joiner


async def closed(nodes):
    await asyncio.gather(*(n.close() for n in nodes))


def joiner_view():
    fresh = build_model(SPEC, SEED)
    layout, _ = layout_of(fresh)
    return fresh, layout, size_limit(fresh)


def test_joiner_loads_the_majority_snapshot_through_the_trainer(tmp_path):
    """Three peers hold the trained model; a DistroTrainer joining at a P2P checkpoint fetches
    it (the fetch on the event loop, the trainer in a worker thread, as in the daemon) and ends
    up with bit-identical parameters and params_step at the joined step."""
    write_tokens(tmp_path / "train.bin", list(range(256)) * 8, 2)
    spec = RunSpec.from_dict({"model": SPEC.to_dict(), "data": {"kind": "local",
                                                                 "dir": str(tmp_path)}})
    trained = trained_model()
    want = parameter_hash(trained)
    assert want != parameter_hash(build_model(SPEC, SEED))

    async def main():
        servers, sharings, joiner = await network(3)
        try:
            for s in sharings:
                m = offer(s, trained)
            assert len({s.manifest for s in sharings}) == 1  # same bytes, same blob everywhere
            logs = []
            loop = asyncio.get_running_loop()

            def fetch_snapshot(step, layout, max_size):
                return asyncio.run_coroutine_threadsafe(fetch_model(
                    joiner, lambda: ["p0", "p1", "p2"], step, layout, max_size,
                    log=logs.append, timeout=20), loop).result()

            trainer = DistroTrainer(spec, "run", Identity.generate(), log=logs.append)
            state = SimpleNamespace(checkpoint=Checkpoint(CheckpointKind.P2P, ""), step=STEP,
                                    run_seed=SEED)
            await loop.run_in_executor(None, trainer.prepare, 3, state, fetch_snapshot)
            assert parameter_hash(trainer.model) == want == m.params
            assert trainer.params_step == STEP
            assert any("3 of 3 peers offer params" in line for line in logs), logs
            # the next Warmup at the same step keeps the model: nothing is fetched again
            trainer.prepare(3, state, None)
            assert parameter_hash(trainer.model) == want
            # without a way to fetch, a client that must join from peers refuses to take part
            late = DistroTrainer(spec, "run", Identity.generate(), log=logs.append)
            with pytest.raises(ModelUnavailable, match="P2P checkpoint"):
                late.prepare(3, state, None)
            assert late.model is None
        finally:
            await closed(servers + [joiner])
    run(main())


def test_a_tampered_minority_is_outvoted():
    honest, tampered = trained_model(0.01), trained_model(0.02)

    async def main():
        servers, sharings, joiner = await network(3)
        try:
            offer(sharings[0], tampered)  # a self-consistent manifest for other parameters
            good = offer(sharings[1], honest)
            offer(sharings[2], honest)
            fresh, layout, limit = joiner_view()
            logs = []
            m, data = await fetch_model(joiner, lambda: ["p0", "p1", "p2"], STEP, layout, limit,
                                        log=logs.append, timeout=20)
            assert m == good and blob_hash(data) == good.blob
            assert any("outvoted: p0" in line for line in logs), logs
        finally:
            await closed(servers + [joiner])
    run(main())


def test_a_joiner_that_reaches_one_peer_gets_the_model_from_it():
    """A joiner cut off from all the epoch's clients but one (a firewall, a NAT it cannot
    punch) takes the snapshot from that one: every client that applied the epoch holds the
    same content-addressed blob, so any reachable one will do. (The trainer then checks its
    parameters against the hash the witnesses agreed on, test_snapshot.py.)"""
    model = trained_model()

    async def main():
        servers, sharings, joiner = await network(3)
        try:
            for s in sharings:
                good = offer(s, model)
            await servers[0].close()  # unreachable: the joiner's dials time out
            await servers[1].close()
            joiner.timeout = 2
            fresh, layout, limit = joiner_view()
            logs = []
            m, data = await fetch_model(joiner, lambda: ["p0", "p1", "p2"], STEP, layout, limit,
                                        log=logs.append, timeout=30, request_timeout=2)
            assert m == good and blob_hash(data) == good.blob
            assert sum("no manifest from p" in line for line in logs) == 2, logs
        finally:
            await closed(servers + [joiner])
    run(main())


def test_bytes_that_do_not_match_the_blob_hash_are_rejected(monkeypatch):
    model = trained_model()

    async def main():
        servers, sharings, joiner = await network(2)
        try:
            good = offer(sharings[0], model)
            offer(sharings[1], model)
            # p1 announces the honest manifest but serves other bytes under its blob hash
            data = servers[1].store.get(good.blob)
            servers[1].store._blobs[good.blob] = data[:-1] + bytes([data[-1] ^ 1])
            # try the lying holder first: the joiner must fall back to the honest one
            monkeypatch.setattr(model_sharing.random, "shuffle", lambda xs: xs.sort(reverse=True))
            fresh, layout, limit = joiner_view()
            logs = []
            m, got = await fetch_model(joiner, lambda: ["p0", "p1"], STEP, layout, limit,
                                       log=logs.append, timeout=20)
            assert m == good and got == data
            assert any("from p1 failed" in ln and "does not hash" in ln for ln in logs), logs
            # when the only holder lies, nothing verified arrives: a clear failure in time
            logs.clear()
            with pytest.raises(ModelSharingError, match=f"no verified model for step {STEP}"):
                await fetch_model(joiner, lambda: ["p1"], STEP, layout, limit, log=logs.append,
                                  timeout=2, retry_delay=0.5)
            assert any("does not hash" in line for line in logs), logs
        finally:
            await closed(servers + [joiner])
    run(main())


def test_a_peer_without_a_snapshot_and_bad_requests_get_clear_answers(caplog):
    caplog.set_level(logging.INFO, logger=model_sharing.__name__)

    async def main():
        servers, sharings, joiner = await network(1)
        try:
            assert await request_manifest(joiner, "p0") is None  # no snapshot yet: no error
            fresh, layout, limit = joiner_view()
            with pytest.raises(ModelSharingError):  # nobody has one: give up when time is up
                await fetch_model(joiner, lambda: ["p0"], STEP, layout, limit, timeout=1,
                                  retry_delay=0.2)
            # without a log callback the attempts go to the module's logger
            assert any("no snapshot for step" in r.getMessage() for r in caplog.records)
            for raw, why in ((b"not json", "not JSON"), (b'{"type": "weights"}', "unknown request"),
                             (b"[1]", "unknown request"),
                             (b"x" * (MAX_REQUEST + 1), f"over {MAX_REQUEST} bytes")):
                with pytest.raises(RequestError, match=why):
                    await joiner.request("p0", MODEL_ALPN, raw, 4096)
            # the node still serves, and answers a snapshot once it has one
            m = offer(sharings[0], trained_model())
            assert await request_manifest(joiner, "p0") == m
            # a newer snapshot replaces the old one, whose blob is dropped
            m2 = offer(sharings[0], trained_model(0.03), step=STEP + 9)
            assert await request_manifest(joiner, "p0") == m2
            assert m.blob not in servers[0].store and m2.blob in servers[0].store
            assert len(servers[0].store) == 1
        finally:
            await closed(servers + [joiner])
    run(main())


def test_a_failing_handler_is_answered_and_the_node_keeps_serving():
    async def main():
        def broken(request, peer):
            if request == b"boom":
                raise KeyError("bug")
            if request == b"no":
                raise BadRequest("no thanks")
            return b"echo:" + request + peer[:4].encode()

        a, b = IrohNode("a", timeout=10), IrohNode("b", timeout=10)
        b.serve(b"test/echo/1", broken, 64)
        with pytest.raises(Exception, match="already served"):
            b.serve(b"test/echo/1", broken, 64)
        peers = {"a": await a.start(), "b": await b.start()}
        a.set_peers(peers)
        try:
            with pytest.raises(Exception, match="before start"):
                b.serve(b"test/late/1", broken, 64)
            with pytest.raises(RequestError, match="failed the request: KeyError"):
                await a.request("b", b"test/echo/1", b"boom", 64)
            with pytest.raises(RequestError, match="refused the request: no thanks"):
                await a.request("b", b"test/echo/1", b"no", 64)
            echo = b"echo:hi" + a.endpoint_id[:4].encode()
            assert await a.request("b", b"test/echo/1", b"hi", 64) == echo
            with pytest.raises(RequestError):  # the reply is over the asker's limit
                await a.request("b", b"test/echo/1", b"x" * 40, 16)
            with pytest.raises(RequestError):  # a protocol the peer does not serve
                await a.request("b", b"test/none/1", b"hi", 64, timeout=2)
        finally:
            await closed([a, b])
    run(main())


def _m(params, step=STEP, layout="a" * 64):
    return ModelManifest(step, params * 64, params * 64, 100, layout, 10)


def test_choose_majority():
    good, bad = _m("1"), _m("2")
    best, holders, notes = choose_majority({"p0": good, "p1": bad, "p2": good, "p3": None},
                                           STEP, "a" * 64)
    assert best == good and holders == ["p0", "p2"] and any("outvoted: p1" in n for n in notes)
    # a tie is no majority; peers without a snapshot do not vote
    best, holders, notes = choose_majority({"p0": good, "p1": bad, "p2": None}, STEP, "a" * 64)
    assert best is None and any("no majority" in n for n in notes)
    # a lone offer wins; stale snapshots and other model shapes do not count
    best, holders, notes = choose_majority(
        {"p0": good, "p1": _m("2", step=STEP - 5), "p2": _m("3", layout="b" * 64)}, STEP, "a" * 64)
    assert best == good and holders == ["p0"] and len(notes) == 2
    assert choose_majority({"p0": None}, STEP, "a" * 64)[0] is None
    with pytest.raises(ValueError):
        ModelManifest.from_json(dict(good.to_json(), size=-1))
    with pytest.raises(ValueError):
        ModelManifest.from_json(dict(good.to_json(), extra=1))
    assert ModelManifest.from_json(good.to_json()) == good
