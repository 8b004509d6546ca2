"""A client whose model cannot be the run's current one refuses to train, before building
anything: a Hub checkpoint (not implemented), or a P2P checkpoint with no way to fetch the
peers' model (the daemon passes one with the iroh transport; see tests/p2p/test_model_sharing)."""

import asyncio
import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from psyche_client.client.daemon import ClientDaemon  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.training.errors import ModelUnavailable  # noqa: E402
from psyche_client.training.spec import RunSpec  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402
from psyche_coordinator_core import Checkpoint, CheckpointKind  # noqa: E402


@pytest.mark.parametrize("kind,why", [(CheckpointKind.P2P, "no way to fetch"),
                                      (CheckpointKind.Hub, "Hub checkpoint")])
def test_joining_a_run_in_progress_is_refused(kind, why):
    spec = RunSpec.from_dict({"model": {"vocab_size": 256}, "data": {"kind": "local",
                                                                      "dir": "/nonexistent"}})
    trainer = DistroTrainer(spec, "run", Identity.generate())
    state = SimpleNamespace(checkpoint=Checkpoint(kind, "org/repo"), step=57, run_seed=1)
    with pytest.raises(ModelUnavailable, match="step 57") as e:
        trainer.prepare(1, state, None if kind == CheckpointKind.P2P else lambda *a: 1 / 0)
    assert why in str(e.value)
    assert trainer.model is None


def test_the_websocket_transport_cannot_fetch_the_model():
    transport = SimpleNamespace(on_result=None, model_sharing=None)  # as WebSocketTransport
    daemon = ClientDaemon(Identity.generate(), None, transport, None)
    with pytest.raises(ModelUnavailable, match="use --p2p iroh"):
        asyncio.run(daemon._fetch_model(57, "0" * 64, 1000))


def test_a_model_fetch_outlived_by_its_epoch_gives_up_but_the_client_stays(caplog):
    """The peers keep only their latest snapshot: once the epoch a joiner was fetching for is
    over, its starting point is gone for good. The fetch stops, and the client, still in the
    run, prepares again in the next epoch's warmup."""
    from psyche_client.client.daemon import EpochOver

    async def fetch(peers, step, layout, max_size, timeout):
        while True:  # the peers never offer that step: only the epoch's end stops this
            peers()
            await asyncio.sleep(0.01)

    transport = SimpleNamespace(on_result=None, model_sharing=SimpleNamespace(fetch=fetch))
    daemon = ClientDaemon(Identity.generate(), SimpleNamespace(peers=dict), transport, None)
    daemon.sm.state = SimpleNamespace(epoch=3, clients=[])
    daemon.trainer = SimpleNamespace(
        prepare=lambda epoch, state, fetch_snapshot: fetch_snapshot(57, "0" * 64, 1000))

    async def go():
        preparing = asyncio.ensure_future(daemon._prepare(3))
        await asyncio.sleep(0.1)
        assert not preparing.done()  # its epoch goes on: it keeps asking
        daemon.sm.state = SimpleNamespace(epoch=4, clients=[])
        await asyncio.wait_for(preparing, 60)

    with caplog.at_level(logging.INFO, logger="psyche_client.client.daemon"):
        asyncio.run(go())
    lines = [r.getMessage() for r in caplog.records]
    assert any(f"{EpochOver.__name__}: epoch 3 ended" in ln for ln in lines), lines
    assert not daemon._stop.is_set()  # not "cannot take part": the client stays in the run


@pytest.mark.parametrize("where", ["prepare", "train"])
def test_data_that_is_not_the_runs_stops_the_client(where, caplog):
    """A manifest of another dataset (at model loading) or a chunk that does not match it (at a
    training step) cannot get better by retrying: the client stops, saying why; a passing data
    error (a server that did not answer) at a step only skips that step."""
    from psyche_client.data.manifest import DataHashMismatch
    from psyche_client.data.provider import DataError

    def bad(*a):
        raise DataHashMismatch("train/a.bin: bytes 0..65536 differ from the run's data manifest")

    daemon = ClientDaemon(Identity.generate(), SimpleNamespace(peers=dict),
                          SimpleNamespace(on_result=None, model_sharing=None), None)
    daemon.sm.state = SimpleNamespace(epoch=1, clients=[])

    def passing(*a):
        raise DataError("http://h/a.bin: timed out")

    async def go():
        if where == "train":
            daemon.trainer = SimpleNamespace(train=passing)
            await daemon._train(5, "batch")
            assert not daemon._stop.is_set()
            daemon.trainer = SimpleNamespace(train=bad)
            await daemon._train(6, "batch")
        else:
            daemon.trainer = SimpleNamespace(prepare=bad)
            await daemon._prepare(1)

    with caplog.at_level(logging.INFO, logger="psyche_client.client.daemon"):
        asyncio.run(go())
    assert daemon._stop.is_set()
    assert any("cannot take part: train/a.bin" in r.getMessage() for r in caplog.records)
