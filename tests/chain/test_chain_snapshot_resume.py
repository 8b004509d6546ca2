"""Snapshots that survive, on the local chain: the run created with the CLI, two clients train a
tiny Llama and upload their snapshots to a real S3 server, the program records the agreed one;
the run is paused (the `pause` command: every client withdrawn), both clients leave, and two
new client processes resume it: they download the recorded snapshot (anonymous reads), hold
the recorded parameter hash and their first held-out loss is the last one before the pause.

The pause is sent in the WaitingForMembers after epoch 0 (its Cooldown ended early by the
recorded snapshot); waiting_for_members_extra_time keeps that phase open long enough for it.
The new clients start after the pause: a paused run has no clock to lose."""

import asyncio
import subprocess
import sys
import time
import tomllib

import pytest
import tomli_w
from solders.pubkey import Pubkey

from psyche_client.chain.keys import load_keypair
from psyche_client.chain.program import Coordinator
from psyche_coordinator_core import CheckpointKind, ClientState, RunState
from tests.chain.test_chain_e2e import CLI, cli, keypair
from tests.integration.harness import Proc, public_bucket, stop_keeping_logs
from tests.integration.test_snapshot_resume import write_run
from tests.integration.test_training import applied_params, read_metrics

pytest.importorskip("torch")
pytest.importorskip("boto3")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1500)]
RUN_ID = "snapshot-chain"
ZERO = bytes(32)
# The first state of an epoch: its checkpoint is the announced one (a poll that first sees a later
# round may already see a snapshot recorded in the new epoch).
STARTED = (RunState.Warmup, RunState.RoundTrain)
# a chain client process that imports what it needs (torch, the model code: tens of seconds on
# a loaded machine), then waits for a line on stdin before it runs the `train` command
HELD_CHAIN_CLIENT = """
import sys
from psyche_client.cli.solana_client import main
from psyche_client.training.model import load_model_code
load_model_code()
sys.stdin.readline()
main()
"""


class ChainObserver:
    """Polls the run's coordinator account (what the program and the clients read)."""

    def __init__(self, localnet, run_id, payer):
        self.localnet, self.run_id, self.payer = localnet, run_id, load_keypair(payer)
        self.history = []

    def wait(self, predicate, timeout, what):
        async def go():
            c = Coordinator(self.localnet.rpc_url, self.payer,
                            Pubkey.from_string(self.localnet.program_id))
            try:
                account = (await c.fetch_instance(self.run_id)).coordinator_account
                end = time.monotonic() + timeout
                while time.monotonic() < end:
                    st = await c.fetch_state(account)
                    self.history.append(st)
                    if predicate(st):
                        return st
                    await asyncio.sleep(0.2)
            finally:
                await c.close()
            last = self.history[-1] if self.history else None
            raise AssertionError(f"timed out waiting for {what}; last state: "
                                 f"{last.run_state.name if last else None}")
        return asyncio.run(go())


def create_chain_run(localnet, tmp_path, data_dir, s3_server, monkeypatch, run_id,
                     write=write_run):
    """The run made with the CLI, its store a fresh public-read bucket (the client processes get
    the write credentials through the environment): (state.toml, bucket url, owner keypair).
    `write(tmp, data, bucket, endpoint)` writes the run's state.toml."""
    bucket = public_bucket(s3_server, monkeypatch, run_id)
    state = write(tmp_path, data_dir, bucket, s3_server.endpoint)
    tables = tomllib.loads(state.read_text())
    tables["run_id"] = run_id
    state.write_text(tomli_w.dumps(tables))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), keypair=owner)
    return state, bucket, owner


def start_chain_client(localnet, tmp_path, run_id, state, metrics_file, n, held=False, *,
                       relay):
    """Client n's `train` process, with a funded keypair of its own: (keypair path, Proc).
    `held`: it starts now but joins only on its release(), so that its start-up, slow on a
    loaded machine, is not counted in a run's time."""
    key = keypair(tmp_path, f"client-{n}", localnet, sol=10)
    start = [sys.executable, "-u", "-c", HELD_CHAIN_CLIENT] if held else CLI
    return key, Proc(f"client-{n}", [
        *start, "train", "--rpc", localnet.rpc_url, "--ws", localnet.ws_url,
        "--keypair", str(key), "--run-id", run_id,
        "--iroh-relay", relay, "--torch-threads", "1",
        "--micro-batch-size", "4", "--metrics-file", str(metrics_file)],
        subprocess.PIPE if held else None)


def pause_after_epoch_0(localnet, obs, owner, run_id):
    """Epoch 0 ends (its Cooldown ended by the recorded snapshot); the run is paused in the
    WaitingForMembers that follows: every client withdrawn."""
    waiting = obs.wait(lambda s: s.epoch == 1 and s.run_state == RunState.WaitingForMembers,
                       900, "epoch 0 to end")
    cli(localnet, "pause", "--run-id", run_id, keypair=owner)
    paused = obs.wait(lambda s: s.run_state == RunState.Paused, 120, "the pause")
    assert paused.step == waiting.step, "the pause came after epoch 1 had started"
    assert all(c.state != ClientState.Healthy for c in paused.clients)
    return paused


def test_new_clients_resume_from_the_recorded_snapshot_on_chain(localnet, tmp_path, data_dir,
                                                                 s3_server, monkeypatch,
                                                                 iroh_relay):
    state, bucket, owner = create_chain_run(localnet, tmp_path, data_dir, s3_server,
                                            monkeypatch, RUN_ID)
    obs = ChainObserver(localnet, RUN_ID, owner)
    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in (1, 2, 3, 4)}
    procs, keys = {}, {}

    def start(n):
        keys[n], procs[n] = start_chain_client(localnet, tmp_path, RUN_ID, state, metrics[n], n,
                                               relay=iroh_relay)

    try:
        start(1)
        start(2)
        paused = pause_after_epoch_0(localnet, obs, owner, RUN_ID)
        for n in (1, 2):  # every client leaves: stopped (SIGTERM), it withdraws its join for
            procs[n].stop()  # the next epoch (the pause withdrew only this epoch's clients)
        gone = {bytes(load_keypair(keys[n]).pubkey()) for n in (1, 2)}
        obs.wait(lambda s: not gone & {c.signer for c in s.pending}, 30,
                 "the stopped clients to withdraw their joins")
        cli(localnet, "resume", "--run-id", RUN_ID, keypair=owner)
        start(3)
        start(4)
        started = obs.wait(lambda s: s.epoch == 1 and s.run_state in STARTED, 900,
                           "epoch 1 to start")
        assert len(started.clients) == 2  # the new clients only
        obs.wait(lambda s: s.epoch == 1 and s.step >= started.step + 4, 900,
                 "4 rounds of epoch 1")
    finally:
        stop_keeping_logs(procs, tmp_path)

    rec = paused.checkpoint
    assert rec.hash != ZERO and rec.hash == paused.param_hash and rec.step == paused.param_step
    assert started.checkpoint.kind == CheckpointKind.Stored
    assert (started.checkpoint.repo, started.checkpoint.hash) == (rec.repo, rec.hash)
    from psyche_client.snapshots import open_store
    listed = dict(open_store(bucket, endpoint=s3_server.endpoint, progress=False).list())
    assert rec.repo in listed and listed[rec.repo].param_hash == rec.hash.hex()
    logs = {n: read_metrics(metrics[n]) for n in metrics}
    before = [r for r in logs[1] if r["event"] == "heldout"][-1]["loss"]
    for n in (3, 4):
        (model,) = [r for r in logs[n] if r["event"] == "model"]
        assert model["source"] == "store" and model["params"] == rec.hash.hex()
        first = [r for r in logs[n] if r["event"] == "heldout"][0]["loss"]
        assert abs(first - before) <= 1e-6
        assert "DESYNC" not in "\n".join(procs[n].lines)
    after = applied_params({n: logs[n] for n in (3, 4)})
    assert len(after) >= 3
    assert all(len(set().union(*by.values())) == 1 for by in after.values()), after
