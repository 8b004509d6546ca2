"""Strangers join a live run, on the centralized backend with real training and a real S3
store: three clients train a tiny Llama, their checkpointers record a snapshot every
INTERVAL steps; a 4th client joins mid-epoch, downloads the store's (stale) snapshot, replays
the applied result sets of the steps since from its peers until its parameters hash to the
quorum's, warms up, turns Active and has a result applied, all within the epoch it joined; a
5th joins while the 4th syncs and waits in the queue (max_syncing = 1). The logs show the
[SYNC] lines.

Process starts are kept out of the run's clock: the joiners start held and are released once
a snapshot is recorded and the run has moved past it."""

from pathlib import Path

import pytest
import tomli_w

from psyche_coordinator_core import ClientPhase, ClientState, RunState

from .harness import Cluster, Observer, public_bucket
from .test_training import applied_params, read_metrics

pytest.importorskip("iroh")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
INTERVAL = 8
ZERO = bytes(32)
PREFIX = "join-live"


# 8 warm-up rounds keep the queue closed while the 5th client, just released, connects and joins
# (with 2 the 4th was Active before a loaded machine had the 5th joined, and it never queued)
WARMUP_ROUNDS = 8


def write_run(tmp: Path, data: Path, bucket: str, endpoint: str) -> Path:
    path = tmp / "state.toml"
    path.write_text(tomli_w.dumps({
        "run_id": "join-live", "run_seed": 313,
        "config": dict(warmup_time=12, cooldown_time=20, max_round_train_time=15,
                       round_witness_time=2, epoch_time=600, total_steps=500, max_seq_len=64,
                       min_clients=2, init_min_clients=3, witness_nodes=0,
                       global_batch_size_start=8, global_batch_size_end=8,
                       waiting_for_members_extra_time=1, checkpoint_interval=INTERVAL,
                       max_syncing=1, kept_rounds=16, sync_warmup_rounds=WARMUP_ROUNDS),
        "model": dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                      intermediate_size=128, max_seq_len=64),
        "optimizer": dict(kind="distro", lr=0.003, warmup_steps=2, chunk=32, topk=16),
        "data": dict(kind="local", dir=str(data / "train"), token_size=2,
                     shuffle_seed="6b" * 32, heldout_dir=str(data / "heldout"),
                     heldout_sequences=8),
        "checkpoint": dict(store=bucket, endpoint=endpoint, keep=3),
    }))
    return path


@pytest.fixture
def bucket(s3_server, monkeypatch):
    """A fresh public-read bucket; the client processes get the write credentials (env)."""
    return public_bucket(s3_server, monkeypatch, "join-live", PREFIX)


def phase(st, signer):
    i = st.client_index(signer)
    if i is None or st.clients[i].state != ClientState.Healthy:
        return None
    return st.clients[i].phase


@pytest.mark.heavy
def test_a_stranger_joins_mid_epoch_and_trains_within_it(tmp_path, data_dir, bucket, s3_server):
    pytest.importorskip("torch")
    pytest.importorskip("boto3")
    c = Cluster(tmp_path, write_run(tmp_path, data_dir, bucket, s3_server.endpoint))
    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in range(1, 6)}

    def start(n, held=False):
        return c.start_client(n, held=held, extra=("--torch-threads", "1", "--metrics-file",
                                                   str(metrics[n]), "--micro-batch-size", "4"))

    def logs(n):
        return read_metrics(metrics[n])

    try:
        c.start_server()
        obs = Observer(c.port, c.run_id)
        for n in (1, 2, 3):
            start(n)
        joiners = {n: start(n, held=True) for n in (4, 5)}
        # a snapshot is recorded, and the run moves on: the joiner's snapshot will be stale
        stale = obs.wait(lambda s: s.epoch == 0 and s.run_state == RunState.RoundTrain
                         and s.checkpoint.hash != ZERO and s.step >= s.checkpoint.step + 3, 900,
                         "a recorded snapshot in epoch 0, three steps behind")
        four, five = c.signer(4), c.signer(5)
        joiners[4].release()
        obs.wait(lambda s: phase(s, four) is not None, 300, "the 4th client to join")
        joiners[5].release()
        obs.wait(lambda s: phase(s, five) == ClientPhase.Queued, 300, "the 5th to queue")

        def applied_from_four(s):
            return s.epoch > 0 or any(four.hex() in r.get("trainers", ()) for r in logs(1)
                                      if r["event"] == "apply")
        end = obs.wait(applied_from_four, 900, "a result of the 4th client to be applied")
        c.clients[4].wait_line(r"\[SYNC\] Sync complete", 60)
    finally:
        c.stop()
        print(c.dump())  # shown by pytest only when the test fails

    assert end.epoch == 0, "the 4th client's result was not applied within the epoch it joined"
    history = [s for s in obs.history if s.epoch == 0]
    seen4 = [phase(s, four) for s in history]
    order = [p for k, p in enumerate(seen4) if p is not None and (k == 0 or seen4[k - 1] != p)]
    assert order[-3:] == [ClientPhase.Syncing, ClientPhase.WarmingUp, ClientPhase.Active], order
    # the 5th waited in the queue while the 4th synced or warmed up
    assert any(phase(s, five) == ClientPhase.Queued
               and phase(s, four) in (ClientPhase.Syncing, ClientPhase.WarmingUp)
               for s in history)

    out4, out5 = ("\n".join(c.clients[n].lines) for n in (4, 5))
    for line in ("[SYNC] Synchronising weights with peers. Node won't process batches in this "
                 "phase.", "[SYNC] This phase will last ",
                 "[SYNC] Synchronising optimizer state. Node is now processing batches, but "
                 "doesn't contribute to weight averaging yet.",
                 f"[SYNC] This phase will last {WARMUP_ROUNDS} steps",
                 "[SYNC] Sync complete. Node is now fully contributing to training."):
        assert line in out4, line
    assert "[SYNC] queued: position 1 of 1" in out5
    assert "DESYNC" not in out4 and "cannot take part" not in out4

    # the 4th started from a recorded (stale) snapshot downloaded from the store
    (model,) = [r for r in logs(4) if r["event"] == "model"]
    recorded = {s.checkpoint.hash.hex(): s.checkpoint.step for s in obs.history}
    assert model["source"] == "store" and recorded.get(model["params"]) == model["step"]
    assert model["step"] <= stale.checkpoint.step + INTERVAL
    # it replayed the steps since to the quorum's parameters (synced at a later step than its
    # snapshot's), and after every step it applied its parameters are the incumbents'
    synced = int(c.clients[4].wait_line(r"\[SYNC\] synced at step (\d+)", 1).group(1))
    assert synced >= model["step"] + 2
    by_step = applied_params({n: logs(n) for n in (1, 2, 3, 4)})
    mine = sorted(s for s, by in by_step.items() if 4 in by)
    assert set(range(model["step"] - 1, synced - 1)) <= set(mine) and len(mine) >= 5
    for s in mine:
        hashes = set().union(*by_step[s].values())
        assert len(by_step[s]) >= 2 and len(hashes) == 1, f"step {s}: {by_step[s]}"
    # its results while warming up were never applied; its result once Active was
    warming = {s.step for s in history if s.client_index(four) is not None
               and s.current_round.warming >> s.client_index(four) & 1}
    applied4 = {r["step"] for n in (1, 2, 3) for r in logs(n)
                if r["event"] == "apply" and four.hex() in r.get("trainers", ())}
    assert applied4 and not applied4 & warming


def test_simulated_joiners_sync_from_the_run_seed(tmp_path):
    """The same flow with simulated training (no model, no store): the joiner's base is the
    run seed's model (labelled step 1), and it replays every applied set since from peers. Its
    20 warm-up rounds keep the queue closed while the 5th client starts."""
    from .harness import write_state
    c = Cluster(tmp_path, write_state(tmp_path, run_id="join-sim", epoch_time=600,
                                      max_syncing=1, kept_rounds=200, sync_warmup_rounds=20,
                                      init_min_clients=3))
    try:
        c.start_server()
        obs = Observer(c.port, c.run_id)
        for n in (1, 2, 3):
            c.start_client(n)
        held = c.start_client(5, held=True)  # imports done before its turn
        obs.wait(lambda s: s.run_state == RunState.RoundTrain and s.step >= 4, 300, "step 4")
        c.start_client(4)
        four, five = c.signer(4), c.signer(5)
        obs.wait(lambda s: phase(s, four) is not None, 300, "the 4th client to join")
        held.release()
        end = obs.wait(lambda s: phase(s, four) == ClientPhase.Active and phase(s, five) in (
            ClientPhase.Syncing, ClientPhase.WarmingUp), 300, "the 4th active, the 5th syncing")
    finally:
        c.stop()
        print(c.dump())
    assert end.epoch == 0
    out4 = "\n".join(c.clients[4].lines)
    assert "[SYNC] base model ready: the snapshot of step 1" in out4
    assert "[SYNC] Sync complete. Node is now fully contributing to training." in out4
    assert "[SYNC] queued: position 1 of 1" in "\n".join(c.clients[5].lines)
