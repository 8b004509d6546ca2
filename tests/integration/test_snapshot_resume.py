"""Snapshots that survive, on the centralized backend with a real S3 server: real training of a
tiny Llama, elected checkpointers that upload to the store and record the agreed hash, and
clients that start from the recorded snapshot after a pause.

- every client leaves, the server is SIGKILLed and restarted from its state file, and new
  processes resume the run: they download the snapshot (anonymous reads), their parameters
  hash to the recorded checkpoint.hash, and their first held-out loss equals the last one
  before the pause; a snapshot point mid-epoch (checkpoint_interval) was
  recorded too, and `psyche-snapshot check` loads the recorded snapshot with transformers;
- the fork case: the incumbents stay and a new process joins; all of them train from the
  recorded parameters, in lockstep.

The pause: the server's SIGUSR1, sent in the WaitingForMembers after epoch 0 (its Cooldown ended
early by the recorded snapshot); waiting_for_members_extra_time keeps that phase open long
enough for it, so the run pauses with the parameters of the recorded snapshot. Process starts
are kept out of the run's clock: the new clients start held."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli_w

from psyche_coordinator_core import CheckpointKind, ClientState, RunState

from .harness import Cluster, Observer, public_bucket
from .test_training import applied_params, read_metrics

pytest.importorskip("torch")
pytest.importorskip("boto3")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1500)]
INTERVAL = 3
ZERO = bytes(32)
PREFIX = "resume-run"  # keys no other test's bucket uses: the server's access log is shared


def write_run(tmp: Path, data: Path, bucket: str, endpoint: str, init_min_clients=2) -> Path:
    path = tmp / "state.toml"
    path.write_text(tomli_w.dumps({
        "run_id": "snapshot-e2e", "run_seed": 777,
        "config": dict(warmup_time=12, cooldown_time=60, max_round_train_time=15,
                       round_witness_time=2, epoch_time=20, total_steps=500, max_seq_len=64,
                       min_clients=2, init_min_clients=init_min_clients, witness_nodes=0,
                       global_batch_size_start=8, global_batch_size_end=8,
                       waiting_for_members_extra_time=15, checkpoint_interval=INTERVAL),
        "model": dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                      intermediate_size=128, max_seq_len=64),
        "optimizer": dict(kind="distro", lr=0.003, warmup_steps=2, chunk=32, topk=16),
        "data": dict(kind="local", dir=str(data / "train"), token_size=2,
                     shuffle_seed="5a" * 32, heldout_dir=str(data / "heldout"),
                     heldout_sequences=8),
        "checkpoint": dict(store=bucket, endpoint=endpoint, keep=3),
    }))
    return path


@pytest.fixture
def bucket(s3_server, monkeypatch):
    """A fresh public-read bucket; the client processes get the write credentials (env)."""
    return public_bucket(s3_server, monkeypatch, "snapshot-e2e", PREFIX)


class Run:
    def __init__(self, tmp, state):
        # the server persists its state: a killed one resumes from it
        self.c = Cluster(tmp, state, ("--save-state-dir", str(tmp / "saved")))
        self.tmp = tmp
        self.metrics = {}

    def start(self, n, held=False):
        self.metrics[n] = self.tmp / f"client-{n}.jsonl"
        return self.c.start_client(n, held=held, extra=(
            "--torch-threads", "1", "--metrics-file", str(self.metrics[n]),
            "--micro-batch-size", "4"))

    def logged(self, n, event):
        return [r for r in read_metrics(self.metrics[n]) if r["event"] == event]

    def output(self, n) -> str:
        return "\n".join(self.c.clients[n].lines)


def pause_after_the_first_epoch(run, obs):
    """Epoch 0 trains, its Cooldown snapshot is recorded (which ends the Cooldown), the run is
    paused in the WaitingForMembers that follows: every client is withdrawn."""
    waiting = obs.wait(lambda s: s.epoch == 1 and s.run_state == RunState.WaitingForMembers,
                       900, "epoch 0 to end")
    run.c.pause()
    paused = obs.wait(lambda s: s.run_state == RunState.Paused, 120, "the pause")
    assert paused.step == waiting.step, "the pause came after epoch 1 had started"
    assert all(c.state != ClientState.Healthy for c in paused.clients)
    return paused


def resume_and_train(run, obs, joiners, paused, rounds=4):
    run.c.resume()
    for n in joiners:
        run.c.clients[n].release()
    started = obs.wait(lambda s: s.epoch == 1 and s.run_state == RunState.RoundTrain, 900,
                       "epoch 1 to start")
    obs.wait(lambda s: s.epoch == 1 and s.step >= started.step + rounds and s.param_step
             > paused.param_step, 900, f"{rounds} rounds of epoch 1, agreed by the witnesses")
    return started


def wait_all_applied(run, clients, step, timeout=300.0) -> None:
    """Until each of `clients` has logged the apply of `step` (they apply a round at slightly
    different moments, later ones on a loaded machine); a metrics line still being written is
    skipped until it is whole."""
    deadline = time.monotonic() + timeout
    while True:
        behind = []
        for n in clients:
            path, done = run.metrics[n], False
            for line in (path.read_text().splitlines() if path.exists() else []):
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                done = done or (r.get("event") == "apply" and r.get("step", -1) >= step)
            if not done:
                behind.append(n)
        if not behind:
            return
        assert time.monotonic() < deadline, f"clients {behind} never applied step {step}"
        time.sleep(0.5)


def test_new_clients_resume_from_the_recorded_snapshot(tmp_path, data_dir, bucket, s3_server):
    run = Run(tmp_path, write_run(tmp_path, data_dir, bucket, s3_server.endpoint))
    try:
        run.c.start_server()
        obs = Observer(run.c.port, run.c.run_id)
        run.start(1)
        run.start(2)
        new = {n: run.start(n, held=True) for n in (3, 4)}
        paused = pause_after_the_first_epoch(run, obs)
        # paused, the run's clock stops: look at the store while it holds epoch 0's snapshots
        stored = check_the_store(tmp_path, bucket, s3_server, obs, paused)
        for n in (1, 2):  # every client leaves
            run.c.clients[n].stop()
        # and the server is killed: restarted from its state file, it still holds the record
        port = run.c.port
        run.c.server.kill()
        run.c.start_server(port)
        again = obs.wait(lambda s: True, 120, "a state after the restart")
        assert again.run_state == RunState.Paused and again.checkpoint == paused.checkpoint
        started = resume_and_train(run, obs, new, paused)
    finally:
        run.c.stop()
        print(run.c.dump())  # shown by pytest only when the test fails

    rec = paused.checkpoint
    # the new epoch announced the recorded snapshot, not the run seed
    assert started.checkpoint.kind == CheckpointKind.Stored
    assert (started.checkpoint.repo, started.checkpoint.hash) == (rec.repo, rec.hash)
    # the new clients started from it: downloaded anonymously, the recorded hash
    for n in (3, 4):
        (model,) = run.logged(n, "model")
        assert model["source"] == "store" and model["params"] == rec.hash.hex()
        assert "DESYNC" not in run.output(n) and "cannot take part" not in run.output(n)
    # (only downloads read blobs: a checkpointer's prune reads manifests)
    gets = [r for r in s3_server.requests() if r.operation == "s3_GetObject"
            and r.key.startswith(f"{PREFIX}/blobs/")]
    assert len(gets) >= 2 and all(r.requester == "-" and r.status == 200 for r in gets), gets
    # same held-out set, same parameters: the loss goes on where it stopped
    before = run.logged(1, "heldout")[-1]["loss"]
    for n in (3, 4):
        assert abs(run.logged(n, "heldout")[0]["loss"] - before) <= 1e-6
    assert abs(stored["loss"] - before) <= 1e-6  # and psyche-snapshot's figure is the same
    # they train on together, in lockstep
    after = applied_params({n: read_metrics(run.metrics[n]) for n in (3, 4)})
    assert len(after) >= 3
    assert all(len(set().union(*by.values())) == 1 for by in after.values()), after


def check_the_store(tmp_path, bucket, s3_server, obs, paused) -> dict:
    """The recorded snapshots are in the S3 server (read without credentials), the last
    `keep` of them, with the recorded pair in their manifests; psyche-snapshot loads the
    recorded one with transformers."""
    from psyche_client.snapshots import open_store
    rec = paused.checkpoint
    assert rec.hash != ZERO and rec.hash == paused.param_hash and rec.step == paused.param_step
    # snapshot points mid-epoch were recorded during epoch 0's rounds (checkpoint_interval)
    mid = [s.checkpoint for s in obs.history if s.epoch == 0 and s.run_state in (
        RunState.RoundTrain, RunState.RoundWitness) and s.checkpoint.hash != ZERO]
    assert mid and all(ck.step % INTERVAL == 0 and ck.step <= rec.step for ck in mid)
    store = open_store(bucket, endpoint=s3_server.endpoint, progress=False)
    listed = store.list()
    # every multiple of INTERVAL up to the Cooldown's step was a snapshot; the last 3 are kept
    points = sorted({k for k in range(INTERVAL, rec.step + 1, INTERVAL)} | {rec.step})
    assert [m.step for _, m in listed] == points[-3:]
    stored = dict(listed)
    for ck in (mid[-1], rec):
        m = stored[ck.repo]
        assert (m.step, m.param_hash, m.run_id) == (ck.step, ck.hash.hex(), "snapshot-e2e")
        assert set(m.files) == {"config.json", "model.safetensors"}
    out = subprocess.run([sys.executable, "-m", "psyche_client.cli.snapshot", "check",
                          "--state", str(tmp_path / "state.toml"), "--expect-hash",
                          rec.hash.hex(), "--micro-batch-size", "4", rec.repo],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "parameter hash: ok" in out.stdout
    loss = float(out.stdout.rsplit("held-out loss ", 1)[1].split()[0])
    return {"loss": loss}


def test_incumbents_and_a_new_client_resume_together(tmp_path, data_dir, bucket, s3_server):
    """The fork case: after the pause the incumbents keep their parameters (they are the
    recorded ones) and the new process downloads them; nobody trains from the run seed."""
    run = Run(tmp_path, write_run(tmp_path, data_dir, bucket, s3_server.endpoint,
                                  init_min_clients=3))
    try:
        run.c.start_server()
        obs = Observer(run.c.port, run.c.run_id)
        for n in (1, 2, 3):
            run.start(n)
        run.start(4, held=True)
        paused = pause_after_the_first_epoch(run, obs)
        run.c.clients[3].stop()  # one incumbent leaves; 1 and 2 stay and join again
        started = resume_and_train(run, obs, [4], paused)
        signers = {run.c.signer(n) for n in (1, 2, 4)}
        assert {c.signer for c in started.clients} == signers
        wait_all_applied(run, (1, 2, 4), started.step + 2)
    finally:
        run.c.stop()
        print(run.c.dump())  # shown by pytest only when the test fails

    logs = {n: read_metrics(run.metrics[n]) for n in (1, 2, 4)}
    # every step of the resumed epoch up to the last one all three had applied when they were
    # stopped (the clients apply a round at slightly different moments): one parameter hash
    applied = applied_params(logs)
    last = min(max((s for s, by in applied.items() if n in by), default=0) for n in logs)
    resumed = {s: by for s, by in applied.items() if started.step <= s <= last}
    assert len(resumed) >= 3, f"the three applied together only up to step {last}"
    for step, by_client in resumed.items():
        assert set(by_client) == {1, 2, 4}, f"step {step} applied by {sorted(by_client)}"
        assert len(set().union(*by_client.values())) == 1, f"step {step}: {by_client}"
    for n in (1, 2, 4):
        assert "DESYNC" not in run.output(n) and "cannot take part" not in run.output(n)

    rec = paused.checkpoint
    assert rec.hash != ZERO and started.checkpoint.kind == CheckpointKind.Stored
    (model,) = [r for r in logs[4] if r["event"] == "model"]
    assert model["source"] == "store" and model["params"] == rec.hash.hex()
    for n in (1, 2):  # the incumbents checked theirs against the recorded hash, kept them
        assert f"keeping the held parameters, they are the recorded snapshot's (step " \
               f"{rec.step}, params {rec.hash.hex()[:16]})" in run.output(n)
    print(json.dumps({"recorded": rec.repo, "step": rec.step}))
