"""A client whose model cannot be the run's current one refuses to train, before building
anything; at the run's seeded start it builds the model as usual."""

from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from psyche_coordinator_core import Checkpoint, CheckpointKind  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.training.errors import ModelUnavailable  # noqa: E402
from psyche_client.training.spec import RunSpec  # noqa: E402
from psyche_client.training.trainer import DistroTrainer  # noqa: E402


@pytest.mark.parametrize("kind", [CheckpointKind.P2P, CheckpointKind.Hub])
def test_joining_a_run_in_progress_is_refused(kind):
    spec = RunSpec.from_dict({"model": {"vocab_size": 256}, "data": {"kind": "local",
                                                                      "dir": "/nonexistent"}})
    trainer = DistroTrainer(spec, "run", Identity.generate(), log=lambda *a: None)
    state = SimpleNamespace(checkpoint=Checkpoint(kind, "org/repo"), step=57, run_seed=1)
    with pytest.raises(ModelUnavailable, match="step 57"):
        trainer.prepare(1, state)
    assert trainer.model is None
