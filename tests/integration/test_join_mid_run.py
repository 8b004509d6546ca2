"""End to end on the centralized backend, real training: clients that join a run after its first
epoch get the model from their peers (P2P model sharing over iroh) and then train in lockstep.
Joins mid-epoch are off (max_syncing = 0): a joiner waits for the next epoch, as before the
sync phases (test_join_live.py has them on).

Clients 1 and 2 train epoch 0 of a tiny Llama; client 3 starts during epoch 0 and joins epoch 1,
whose checkpoint is P2P; then client 2 is killed and restarted, and joins a later epoch from its
peers (1 and 3, one of which got its own model that way). After every round a client applied,
its parameters equal those of every other client that applied it.

Timing. The test waits on states and on the clients' metrics, never on the clock, but the run
itself is clocked: epochs end by time and the run by step count. On a loaded machine a process
start (Python, torch, the model code) takes tens of seconds, and the epochs that run meanwhile
spend steps: client 3 and client 2's second process start with the first two and wait, their
imports done, until the test releases them; and the run has steps to spare. A round whose
training timed out needs its witnesses within round_witness_time, counted in whole seconds: 1
would leave them anywhere between 0 and 1 s, and a round without witnesses ends the epoch for
everyone (and this run's P2P checkpoint with it); 2 leaves 1 s."""

from collections import defaultdict
from pathlib import Path

import pytest
import tomli_w

from psyche_coordinator_core import ClientState

from .harness import Cluster, Observer
from .test_training import applied_params, read_metrics

pytest.importorskip("torch")
pytest.importorskip("iroh")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1800)]
TOTAL_STEPS = 40


def write_run(tmp: Path, data: Path) -> Path:
    path = tmp / "state.toml"
    path.write_text(tomli_w.dumps({
        "run_id": "join-e2e", "run_seed": 4242,
        "config": dict(warmup_time=10, cooldown_time=2, max_round_train_time=10,
                       round_witness_time=2, epoch_time=12, total_steps=TOTAL_STEPS,
                       max_seq_len=64,
                       min_clients=2, init_min_clients=2, witness_nodes=0,
                       global_batch_size_start=12, global_batch_size_end=12,
                       waiting_for_members_extra_time=1, max_syncing=0),
        "model": dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                      intermediate_size=128, max_seq_len=64),
        "optimizer": dict(kind="distro", lr=0.003, warmup_steps=2, chunk=32, topk=16),
        "data": dict(kind="local", dir=str(data / "train"), token_size=2,
                     shuffle_seed="3c" * 32, heldout_dir=str(data / "heldout"),
                     heldout_sequences=8),
    }))
    return path


def test_clients_joining_later_fetch_the_model_from_peers(tmp_path, data_dir):
    from psyche_coordinator_core import RunState

    c = Cluster(tmp_path, write_run(tmp_path, data_dir))
    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in (1, 2, 3)}

    def start(n, held=False):
        return c.start_client(n, held=held, extra=("--torch-threads", "1", "--metrics-file",
                                                   str(metrics[n]), "--micro-batch-size", "6"))

    def logged(n, event, since=0):
        return [r for r in read_metrics(metrics[n])[since:] if r["event"] == event]

    try:
        c.start_server()
        obs = Observer(c.port, c.run_id)
        start(1)
        killed = start(2)
        # started now, run when released: client 3, and client 2's next process (same key)
        late, again = start(3, held=True), start(2, held=True)
        obs.wait(lambda s: s.epoch == 0 and s.run_state == RunState.RoundTrain, 600,
                 "epoch 0 to train")
        late.release()  # joins epoch 1 at the earliest: P2P checkpoint by then
        three = c.signer(3)
        obs.wait(lambda s: s.epoch >= 1 and healthy(s, three) and logged(3, "train"), 600,
                 "client 3 to train in a later epoch")
        killed.kill()  # and the restarted client 2 joins again from its peers
        first_life = len(read_metrics(metrics[2]))  # a restarted client appends to its file
        again.release()
        back = obs.wait(lambda s: s.run_state == RunState.Finished
                        or logged(2, "model", first_life), 900,
                        "the restarted client 2 to get the model from its peers")
        end = obs.wait(lambda s: s.run_state == RunState.Finished, 900, "the run to finish")
        for n in (1, 2, 3):
            assert c.clients[n].p.wait(120) == 0, c.clients[n].output()
        c.stop()
        print(f"the restarted client 2 had its model at step {back.step} of {TOTAL_STEPS}")
        check(c, metrics, killed, end)
    finally:
        c.stop()
        print(c.dump())  # shown by pytest only when the test fails


def healthy(st, signer) -> bool:
    i = st.client_index(signer)
    return i is not None and st.clients[i].state == ClientState.Healthy


def check(c, metrics, killed, end):
    logs = {n: read_metrics(p) for n, p in metrics.items()}
    out = {n: "\n".join(c.clients[n].lines) for n in (1, 2, 3)}
    assert end.step > TOTAL_STEPS

    # who shared what: every client's snapshots by step
    snaps = defaultdict(dict)
    for n in logs:
        for r in logs[n]:
            if r["event"] == "snapshot":
                snaps[r["step"]][n] = r["params"]
    assert all(len(set(v.values())) == 1 for v in snaps.values()), snaps

    # client 3 and the restarted client 2 got their model from the peers: the majority snapshot
    models = {n: [r for r in logs[n] if r["event"] == "model"] for n in logs}
    assert [r["source"] for r in models[1]] == ["seed"]
    assert [r["source"] for r in models[3]] == ["peers"]
    assert [r["source"] for r in models[2]] == ["seed", "peers"]
    for m in models[3] + models[2][1:]:
        assert m["step"] > 1 and set(snaps[m["step"]].values()) == {m["params"]}
    assert "fetching the model for step" in out[3] and "cannot take part" not in out[3]
    assert "fetching the model for step" in out[2]
    assert "fetching the model" not in "\n".join(killed.lines)  # its first life began at seed

    # after every round a client applied, its parameters are everyone else's
    applied = applied_params(logs)
    for step, by_client in applied.items():
        hashes = set().union(*by_client.values())
        assert len(hashes) == 1, f"step {step}: parameters differ: {by_client}"
    late = [s for s, by in applied.items() if 3 in by]
    assert len(late) >= 5 and all(len(applied[s]) >= 2 for s in late)
    rejoined = [s for s in late if s >= models[2][1]["step"] and 2 in applied[s]]
    assert len(rejoined) >= 3
    trained3 = {r["step"] for r in logs[3] if r["event"] == "train"}
    assert len(trained3) >= 5
