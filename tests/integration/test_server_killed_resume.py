"""The centralized server SIGKILLed with its clients: the run resumes from the recorded snapshot.

A tiny Llama trains epoch 0 with a real S3 server as the run's store; its Cooldown snapshot is
recorded (which ends the Cooldown). In the WaitingForMembers that follows, the server is killed
with SIGKILL and so is every client: the saved state still lists them as members. The server
restarts from its state file (--save-state-dir); the members that do not connect again within
--reconnect-grace are withdrawn, so the next epoch has nobody who holds the model and falls back
to the recorded snapshot (Stored).

- first restart: the run's store cannot be reached (the state file's endpoint is a closed port):
  the new clients refuse with the ModelUnavailable reason and never train random weights;
- second restart, the store back: new client processes download the snapshot, their parameters
  hash to the recorded checkpoint.hash, and their first held-out loss equals the last one before
  the kill."""

import socket
import time
from pathlib import Path

import pytest
import tomli_w

from psyche_coordinator_core import CheckpointKind, RunState

from .harness import Cluster, Observer, public_bucket
from .test_training import read_metrics

pytest.importorskip("torch")
pytest.importorskip("boto3")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1200)]
ZERO = bytes(32)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_run(path: Path, data: Path, bucket: str, endpoint: str) -> Path:
    path.write_text(tomli_w.dumps({
        "run_id": "server-killed", "run_seed": 4242,
        "config": dict(warmup_time=12, cooldown_time=60, max_round_train_time=15,
                       round_witness_time=2, epoch_time=20, total_steps=500, max_seq_len=64,
                       min_clients=2, init_min_clients=2, witness_nodes=0,
                       global_batch_size_start=8, global_batch_size_end=8,
                       waiting_for_members_extra_time=10, checkpoint_interval=0),
        "model": dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                      intermediate_size=128, max_seq_len=64),
        "optimizer": dict(kind="distro", lr=0.003, warmup_steps=2, chunk=32, topk=16),
        "data": dict(kind="local", dir=str(data / "train"), token_size=2,
                     shuffle_seed="3c" * 32, heldout_dir=str(data / "heldout"),
                     heldout_sequences=8),
        "checkpoint": dict(store=bucket, endpoint=endpoint, keep=3),
    }))
    return path


@pytest.fixture
def bucket(s3_server, monkeypatch):
    """A fresh public-read bucket; the client processes get the write credentials (env)."""
    return public_bucket(s3_server, monkeypatch, "server-killed", "run")


class Run:
    def __init__(self, tmp: Path, state: Path):
        self.tmp, self.saved = tmp, tmp / "saved"
        self.c = Cluster(tmp, state, ("--save-state-dir", str(self.saved),
                                      "--reconnect-grace", "3"))
        self.metrics = {}

    def start(self, n):
        self.metrics[n] = self.tmp / f"client-{n}.jsonl"
        return self.c.start_client(n, extra=("--torch-threads", "1", "--metrics-file",
                                             str(self.metrics[n]), "--micro-batch-size", "4"))

    def logged(self, n, event):
        return [r for r in read_metrics(self.metrics[n]) if r["event"] == event]

    def output(self, n) -> str:
        return "\n".join(self.c.clients[n].lines)

    def kill_all(self, clients):
        """SIGKILL the server, then every client: the saved state still lists them."""
        self.c.server.kill()
        for n in clients:
            self.c.clients[n].kill()

    def wait_for(self, what, predicate, timeout=120):
        end = time.time() + timeout
        while not predicate():
            assert time.time() < end, f"timed out waiting for {what}\n{self.c.dump()}"
            time.sleep(0.2)


def test_server_killed_with_its_clients_resumes_from_the_snapshot(tmp_path, data_dir, bucket,
                                                                  s3_server):
    from psyche_client.server.persistence import StateStore

    state_toml = tmp_path / "state.toml"
    write_run(state_toml, data_dir, bucket, s3_server.endpoint)
    run = Run(tmp_path, state_toml)
    try:
        run.c.start_server()
        port = run.c.port
        obs = Observer(port, run.c.run_id)
        run.start(1)
        run.start(2)
        # epoch 0 trains; its Cooldown snapshot is recorded, which ends the Cooldown
        recorded = obs.wait(lambda s: s.epoch == 1 and s.checkpoint.hash != ZERO, 900,
                            "epoch 0's snapshot to be recorded")
        ck = recorded.checkpoint
        assert recorded.run_state == RunState.WaitingForMembers
        assert (ck.step, ck.hash) == (recorded.param_step, recorded.param_hash)
        # the held-out loss both clients took at the Cooldown (before the snapshot's upload)
        run.wait_for("the Cooldown's held-out losses",
                     lambda: all(run.logged(n, "heldout")[-1:] and run.logged(n, "heldout")[-1]
                                 ["epoch"] == 0 for n in (1, 2)), 60)
        before = run.logged(1, "heldout")[-1]["loss"]
        run.kill_all((1, 2))

        saved = StateStore(run.saved).load()
        # killed before epoch 1 began: the parameters are still the snapshot's
        assert (saved.epoch, saved.run_state, saved.checkpoint) == (1, RunState.WaitingForMembers,
                                                                    ck), run.c.dump()
        members = {c.signer for c in saved.pending} | {c.signer for c in saved.clients}
        assert members == {run.c.signer(1), run.c.signer(2)}

        # first restart: the store is unreachable; the new clients refuse to train
        write_run(state_toml, data_dir, bucket, f"http://127.0.0.1:{closed_port()}")
        run.c.start_server(port)
        for n in (3, 4):
            run.start(n)
        for n in (3, 4):
            run.c.clients[n].wait_line("cannot take part: cannot get the recorded snapshot of "
                                       f"step {ck.step}", 300)
            run.c.clients[n].p.wait(60)  # it leaves the run
            assert run.logged(n, "model") == [] and run.logged(n, "train") == []
        refused = obs.wait(lambda s: not s.pending and s.healthy_count() == 0, 60,
                           "the refusing clients to leave")
        # no round ran: the run is where the kill left it
        assert (refused.step, refused.param_step, refused.checkpoint.hash) == (
            saved.step, saved.param_step, ck.hash)
        run.c.server.kill()

        # second restart, the store back: new processes start from the recorded snapshot
        write_run(state_toml, data_dir, bucket, s3_server.endpoint)
        run.c.start_server(port)
        for n in (5, 6):
            run.start(n)
        started = obs.wait(lambda s: s.epoch == 1 and s.run_state == RunState.RoundTrain, 600,
                           "epoch 1 to start")
        trained = obs.wait(lambda s: s.param_step >= started.step + 3, 600,
                           "rounds of epoch 1 agreed by the witnesses")
    finally:
        run.c.stop()
        print(run.c.dump())  # shown by pytest only when the test fails

    assert started.checkpoint.kind == CheckpointKind.Stored
    assert (started.checkpoint.repo, started.checkpoint.hash) == (ck.repo, ck.hash)
    assert {c.signer for c in started.clients} == {run.c.signer(5), run.c.signer(6)}
    for n in (5, 6):
        (model,) = run.logged(n, "model")
        assert model["source"] == "store" and model["params"] == ck.hash.hex()
        first = run.logged(n, "heldout")[0]["loss"]
        assert abs(first - before) <= 1e-6, (first, before)
        assert "DESYNC" not in run.output(n) and "cannot take part" not in run.output(n)
    assert trained.param_hash != ck.hash  # and the run trains on from there
