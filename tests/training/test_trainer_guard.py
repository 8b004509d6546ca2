"""A client whose model cannot be the run's current one refuses to train, before building
anything: a Hub checkpoint (not implemented), or a P2P checkpoint with no way to fetch the
peers' model (the daemon passes one with the iroh transport; see tests/p2p/test_model_sharing)."""

import asyncio
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
