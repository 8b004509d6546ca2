"""Strangers join a live run, on the local chain (psyche-localnet), with real training and a
real S3 store: the run made with the CLI, three clients train a tiny Llama and their
checkpointers record a snapshot every INTERVAL steps; a 4th client joins mid-epoch, downloads
the store's (stale) snapshot, replays the applied result sets of the steps since, fetched from
its peers over p2p, until its parameters hash to the quorum's (the program takes its `synced`),
warms up, turns Active and has a result applied, all within the epoch it joined; a 5th joins
while the 4th syncs and waits in the queue (max_syncing = 1). The logs show the [SYNC] lines.

The centralized twin is tests/integration/test_join_live.py (the same run, the same checks).
Process starts are kept out of the run's clock: the two joiners start held and are released
together once a snapshot is recorded and the run has moved past it; on chain a sync takes only
a few rounds, so "the 4th" is whichever of them the program takes first."""

import re

import pytest

from psyche_client.chain.keys import load_keypair
from psyche_coordinator_core import ClientPhase, ClientState, RunState
from tests.chain.test_chain_snapshot_resume import (
    ChainObserver,
    create_chain_run,
    start_chain_client,
)
from tests.integration.harness import stop_keeping_logs
from tests.integration.test_join_live import INTERVAL, WARMUP_ROUNDS
from tests.integration.test_join_live import write_run as write_join_run
from tests.integration.test_training import applied_params, read_metrics

pytest.importorskip("torch")
pytest.importorskip("boto3")
pytest.importorskip("iroh")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(2400)]
RUN_ID = "join-live-chain"
ZERO = bytes(32)
SYNCING = {ClientPhase.Syncing, ClientPhase.WarmingUp}
SYNC_LINES = (
    "[SYNC] Synchronising weights with peers. Node won't process batches in this phase.",
    "[SYNC] This phase will last ",
    "[SYNC] Synchronising optimizer state. Node is now processing batches, but doesn't "
    "contribute to weight averaging yet.",
    f"[SYNC] This phase will last {WARMUP_ROUNDS} steps",
    "[SYNC] Sync complete. Node is now fully contributing to training.",
)


def phase(st, signer):
    i = st.client_index(signer)
    if i is None or st.clients[i].state != ClientState.Healthy:
        return None
    return st.clients[i].phase


def test_a_stranger_joins_mid_epoch_and_trains_within_it_on_chain(localnet, tmp_path, data_dir,
                                                                  s3_server, monkeypatch,
                                                                  iroh_relay):
    state, _, owner = create_chain_run(localnet, tmp_path, data_dir, s3_server, monkeypatch,
                                       RUN_ID, write=write_join_run)
    obs = ChainObserver(localnet, RUN_ID, owner)
    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in range(1, 6)}
    procs, signers = {}, {}

    def start(n, held=False):
        key, procs[n] = start_chain_client(localnet, tmp_path, RUN_ID, state, metrics[n], n,
                                           held=held, relay=iroh_relay)
        signers[n] = bytes(load_keypair(key).pubkey())

    def logs(n):
        return read_metrics(metrics[n])

    try:
        for n in (1, 2, 3):
            start(n)
        for n in (4, 5):  # funded and imported now; they join when released
            start(n, held=True)
        four, five = signers[4], signers[5]
        # a snapshot is recorded, and the run moves on: the joiner's snapshot will be stale
        stale = obs.wait(lambda s: s.epoch == 0 and s.run_state == RunState.RoundTrain
                         and s.checkpoint.hash != ZERO and s.step >= s.checkpoint.step + 3,
                         1200, "a recorded snapshot in epoch 0, three steps behind")
        # both joiners are released at once: the one the program takes first syncs, the other
        # joins a moment later and waits in the queue (max_syncing = 1) while the first syncs
        # and warms up (K + 1 rounds at least, far longer than the moment between the joins)
        procs[4].release()
        procs[5].release()
        both = obs.wait(lambda s: {phase(s, four), phase(s, five)} & SYNCING
                        and ClientPhase.Queued in (phase(s, four), phase(s, five)), 300,
                        "one joiner syncing while the other is queued")
        first, second = (4, 5) if phase(both, four) in SYNCING else (5, 4)
        joiner = signers[first]

        def applied_from_joiner(s):
            return s.epoch > 0 or any(joiner.hex() in r.get("trainers", ()) for r in logs(1)
                                      if r["event"] == "apply")
        end = obs.wait(applied_from_joiner, 900, "a result of the first joiner to be applied")
        procs[first].wait_line(r"\[SYNC\] Sync complete", 60)
    finally:
        stop_keeping_logs(procs, tmp_path)

    assert end.epoch == 0, "the joiner's result was not applied within the epoch it joined"
    history = [s for s in obs.history if s.epoch == 0]
    seen = [phase(s, joiner) for s in history]
    order = [p for k, p in enumerate(seen) if p is not None and (k == 0 or seen[k - 1] != p)]
    # (Syncing may last less than one poll of the account: the program's acceptance of the
    # joiner's `synced`, checked below, is what shows it synced)
    assert order[-2:] == [ClientPhase.WarmingUp, ClientPhase.Active], order
    assert set(order) <= {ClientPhase.Syncing, ClientPhase.WarmingUp, ClientPhase.Active}, order
    # the second waited in the queue while the first synced or warmed up
    assert any(phase(s, signers[second]) == ClientPhase.Queued and phase(s, joiner) in SYNCING
               for s in history)

    out, out2 = "\n".join(procs[first].lines), "\n".join(procs[second].lines)
    for line in SYNC_LINES:
        assert line in out, line
    assert "[SYNC] queued: position 1 of 1" in out2
    assert "DESYNC" not in out and "cannot take part" not in out

    # the joiner started from a recorded (stale) snapshot downloaded from the store
    (model,) = [r for r in logs(first) if r["event"] == "model"]
    recorded = {s.checkpoint.hash.hex(): s.checkpoint.step for s in obs.history}
    assert model["source"] == "store" and recorded.get(model["params"]) == model["step"]
    assert model["step"] <= stale.checkpoint.step + INTERVAL
    # it replayed the steps since, their applied sets fetched from its peers over p2p, to the
    # quorum's parameters: the program took its `synced` (phase Syncing, the agreed step and
    # hash) at a later step than its snapshot's; after every step it applied, its parameters
    # are the incumbents'
    synced = int(procs[first].wait_line(r"\[SYNC\] synced at step (\d+)", 1).group(1))
    assert synced >= model["step"] + 2
    fetched = {int(m) for m in re.findall(r"applied set of step (\d+) from \w+: \d+ results",
                                          out)}
    assert fetched & set(range(model["step"] - 1, synced - 1)), \
        f"no applied set before step {synced - 1} came from a peer: {sorted(fetched)}"
    by_step = applied_params({n: logs(n) for n in (1, 2, 3, first)})
    mine = sorted(s for s, by in by_step.items() if first in by)
    assert set(range(model["step"] - 1, synced - 1)) <= set(mine)
    # (the chain runs on while the clients are stopped one after the other: the steps compared
    # are those every incumbent had applied by then)
    last = min(max(s for s, by in by_step.items() if n in by) for n in (1, 2, 3))
    compared = [s for s in mine if s <= last]
    assert len(compared) >= 5, f"the joiner and the incumbents applied together only {compared}"
    for s in compared:
        hashes = set().union(*by_step[s].values())
        assert {1, 2, 3, first} <= set(by_step[s]) and len(hashes) == 1, \
            f"step {s}: {by_step[s]}"
    # its results while warming up were never applied; its result once Active was
    warming = {s.step for s in history if s.client_index(joiner) is not None
               and s.current_round.warming >> s.client_index(joiner) & 1}
    applied = {r["step"] for n in (1, 2, 3) for r in logs(n)
               if r["event"] == "apply" and joiner.hex() in r.get("trainers", ())}
    assert applied and not applied & warming
