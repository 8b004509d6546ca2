"""The fork case on the local chain: clients 1 and 2 train epoch 0 and the program records its
Cooldown snapshot (in a real S3 server); the run is paused (every client withdrawn); the
incumbents stay (the same processes join again) and a new process, client 3, joins. The next
epoch announces the recorded snapshot: client 3 downloads it, the incumbents check theirs
against its hash and keep them, and all three train on in lockstep: nobody starts from the
run seed, the run does not fork.

Client 3 starts while the run is paused (a paused run has no clock to lose) and the run is
resumed once the three are registered, so the resumed epoch starts with all of them."""


import pytest

from psyche_client.chain.keys import load_keypair
from psyche_coordinator_core import CheckpointKind
from tests.chain.test_chain_e2e import cli
from tests.chain.test_chain_snapshot_resume import (
    STARTED,
    ChainObserver,
    create_chain_run,
    pause_after_epoch_0,
    start_chain_client,
)
from tests.integration.harness import stop_keeping_logs
from tests.integration.test_training import applied_params, read_metrics

pytest.importorskip("torch")
pytest.importorskip("boto3")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1500)]
RUN_ID = "snapshot-chain-fork"
ZERO = bytes(32)


def test_incumbents_and_a_new_client_resume_together_on_chain(localnet, tmp_path, data_dir,
                                                              s3_server, monkeypatch,
                                                              iroh_relay):
    state, _, owner = create_chain_run(localnet, tmp_path, data_dir, s3_server, monkeypatch,
                                       RUN_ID)
    obs = ChainObserver(localnet, RUN_ID, owner)
    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in (1, 2, 3)}
    procs, signers = {}, {}

    def start(n):
        key, procs[n] = start_chain_client(localnet, tmp_path, RUN_ID, state, metrics[n], n,
                                           relay=iroh_relay)
        signers[n] = bytes(load_keypair(key).pubkey())

    try:
        start(1)
        start(2)
        paused = pause_after_epoch_0(localnet, obs, owner, RUN_ID)
        start(3)  # the incumbents keep running: they join again by themselves
        obs.wait(lambda s: {c.signer for c in s.pending} == set(signers.values()), 300,
                 "the incumbents and the new client to join the paused run")
        cli(localnet, "resume", "--run-id", RUN_ID, keypair=owner)
        started = obs.wait(lambda s: s.epoch == 1 and s.run_state in STARTED, 900,
                           "epoch 1 to start")
        assert {c.signer for c in started.clients} == set(signers.values())
        obs.wait(lambda s: s.epoch == 1 and s.step >= started.step + 5
                 and s.param_step > paused.param_step, 900,
                 "5 rounds of epoch 1, agreed by the witnesses")
    finally:
        stop_keeping_logs(procs, tmp_path)

    rec = paused.checkpoint
    assert rec.hash != ZERO and rec.hash == paused.param_hash and rec.step == paused.param_step
    assert started.checkpoint.kind == CheckpointKind.Stored
    assert (started.checkpoint.repo, started.checkpoint.hash) == (rec.repo, rec.hash)
    logs = {n: read_metrics(metrics[n]) for n in metrics}
    (model,) = [r for r in logs[3] if r["event"] == "model"]
    assert model["source"] == "store" and model["params"] == rec.hash.hex()
    output = {n: "\n".join(procs[n].lines) for n in procs}
    for n in (1, 2):  # the incumbents checked theirs against the recorded hash, kept them
        assert f"keeping the held parameters, they are the recorded snapshot's (step " \
               f"{rec.step}, params {rec.hash.hex()[:16]})" in output[n]
    # every step of the resumed epoch up to the last one all three had applied when they were
    # stopped (the clients apply a round at slightly different moments): one parameter hash
    applied = applied_params(logs)
    last = min(max((s for s, by in applied.items() if n in by), default=0) for n in logs)
    resumed = {s: by for s, by in applied.items() if started.step <= s <= last}
    assert len(resumed) >= 3, f"the three applied together only up to step {last}"
    for step, by_client in resumed.items():
        assert set(by_client) == {1, 2, 3}, f"step {step} applied by {sorted(by_client)}"
        assert len(set().union(*by_client.values())) == 1, f"step {step}: {by_client}"
    for n in (1, 2, 3):
        assert "DESYNC" not in output[n] and "cannot take part" not in output[n]
