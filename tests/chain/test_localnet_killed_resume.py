"""psyche-localnet SIGKILLed with every client of a run: the run resumes from the recorded S3
snapshot once the chain restarts from its --ledger.

A tiny Llama trains epoch 0 on the chain; its Cooldown snapshot is uploaded to a real S3 server
and recorded by the program (which ends the Cooldown). In the WaitingForMembers that follows the
chain is killed, and so is every client: the account still lists them, joined for epoch 1.
Nobody on a chain can withdraw them but themselves, so epoch 1 starts with them (the CLI's tick,
sent before any new client can join); its Warmup times out without their warmup witnesses,
drops them and goes back to waiting; the Warmup that follows has nobody who holds the model and
announces the recorded snapshot (Stored). New client
processes download it: their parameters hash to the recorded checkpoint.hash and their first
held-out loss equals the last one before the kill."""

import asyncio
import signal
import time
import tomllib

import pytest
import tomli_w
from solders.pubkey import Pubkey

from psyche_client.chain.keys import load_keypair
from psyche_client.chain.program import Coordinator
from psyche_coordinator_core import CheckpointKind, RunState
from tests.chain.localnet import start_localnet
from tests.chain.test_chain_e2e import CLI, cli, keypair
from tests.chain.test_chain_snapshot_resume import STARTED
from tests.integration.harness import Proc, public_bucket, stop_keeping_logs
from tests.integration.test_server_killed_resume import write_run
from tests.integration.test_training import applied_params, read_metrics

pytest.importorskip("torch")
pytest.importorskip("boto3")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1500)]
RUN_ID = "killed-chain"
ZERO = bytes(32)


def chain_state(net, payer, predicate=lambda s: True, timeout=60, what="a state"):
    """Polls the run's coordinator account until `predicate` holds."""
    async def go():
        c = Coordinator(net.rpc_url, load_keypair(payer), Pubkey.from_string(net.program_id))
        try:
            account = (await c.fetch_instance(RUN_ID)).coordinator_account
            end, last = time.monotonic() + timeout, None
            while time.monotonic() < end:
                last = await c.fetch_state(account)
                if predicate(last):
                    return last
                await asyncio.sleep(0.2)
        finally:
            await c.close()
        where = f"{last.run_state.name} epoch {last.epoch} step {last.step}" if last else None
        raise AssertionError(f"timed out waiting for {what}; last state: {where}")
    return asyncio.run(go())


def test_localnet_killed_with_its_clients_resumes_from_the_snapshot(tmp_path, data_dir,
                                                                    s3_server, monkeypatch,
                                                                    iroh_relay):
    bucket = public_bucket(s3_server, monkeypatch, "killed-chain")
    state = write_run(tmp_path / "state.toml", data_dir, bucket, s3_server.endpoint)
    tables = tomllib.loads(state.read_text())
    tables["run_id"] = RUN_ID
    tables["config"]["cooldown_time"] = 15  # the epoch of the dead clients waits it out
    state.write_text(tomli_w.dumps(tables))
    ledger = tmp_path / "ledger"
    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in (1, 2, 3, 4)}
    procs, signers = {}, {}

    def start(n, net):
        key = keypair(tmp_path, f"client-{n}", net, sol=10)
        signers[n] = bytes(load_keypair(key).pubkey())
        procs[n] = Proc(f"client-{n}", [
            *CLI, "train", "--rpc", net.rpc_url, "--ws", net.ws_url,
            "--keypair", str(key), "--run-id", RUN_ID,
            "--iroh-relay", iroh_relay, "--torch-threads", "1",
            "--micro-batch-size", "4", "--metrics-file", str(metrics[n])])

    def heldout(n):
        return [r for r in read_metrics(metrics[n]) if r["event"] == "heldout"]

    try:
        with start_localnet("--ledger", str(ledger)) as net:
            owner = keypair(tmp_path, "owner", net, sol=100)
            cli(net, "create-run", "--state", str(state), keypair=owner)
            start(1, net)
            start(2, net)
            recorded = chain_state(net, owner, lambda s: s.epoch == 1 and s.checkpoint.hash
                                   != ZERO, 900, "epoch 0's snapshot to be recorded")
            end = time.time() + 60
            while not all(heldout(n)[-1:] and heldout(n)[-1]["epoch"] == 0 for n in (1, 2)):
                assert time.time() < end, "no held-out loss at epoch 0's Cooldown"
                time.sleep(0.2)
            net.process.send_signal(signal.SIGKILL)
            net.process.wait(10)
            for n in (1, 2):
                procs[n].kill()
        ck = recorded.checkpoint
        before = heldout(1)[-1]["loss"]

        with start_localnet("--ledger", str(ledger)) as net:
            saved = chain_state(net, owner)
            assert (saved.epoch, saved.run_state, saved.checkpoint) == (
                1, RunState.WaitingForMembers, ck), "killed after epoch 1 had begun"
            # the dead clients start epoch 1 before anyone new can join it
            end = time.time() + 60  # (once waiting_for_members_extra_time has passed)
            while (dead := chain_state(net, owner)).run_state == RunState.WaitingForMembers:
                assert time.time() < end, "epoch 1 did not start on a tick"
                cli(net, "tick", "--run-id", RUN_ID, keypair=owner)
            assert dead.run_state == RunState.Warmup and dead.step == saved.step
            start(3, net)
            start(4, net)
            new = {signers[3], signers[4]}
            started = chain_state(net, owner, lambda s: s.run_state in STARTED
                                  and new <= {c.signer for c in s.clients}, 900,
                                  "the epoch of the new clients")
            trained = chain_state(net, owner, lambda s: s.param_step >= started.step + 3, 900,
                                  "rounds of the new clients agreed by the witnesses")
    finally:
        stop_keeping_logs(procs, tmp_path)

    assert started.checkpoint.kind == CheckpointKind.Stored
    assert (started.checkpoint.repo, started.checkpoint.hash) == (ck.repo, ck.hash)
    logs = {n: read_metrics(metrics[n]) for n in metrics}
    for n in (3, 4):
        (model,) = [r for r in logs[n] if r["event"] == "model"]
        assert model["source"] == "store" and model["params"] == ck.hash.hex()
        first = [r for r in logs[n] if r["event"] == "heldout"][0]["loss"]
        assert abs(first - before) <= 1e-6, (first, before)
        assert "DESYNC" not in "\n".join(procs[n].lines)
    after = applied_params({n: logs[n] for n in (3, 4)})
    assert all(len(set().union(*by.values())) == 1 for by in after.values()), after
    assert trained.param_hash != ck.hash
