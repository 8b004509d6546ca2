"""End to end on the local chain, real processes: psyche-localnet, the run created with the
CLI, 3 authorized clients (simulated training) that join with join_run, follow the coordinator
account over PubSub, witness and tick through 2 epochs to the end of the run; an unauthorized
client is refused; a tick signed by an unrelated keypair advances a run."""

import asyncio
import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli_w
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.sysvar import CLOCK

from psyche_client.chain.keys import load_keypair, save_keypair
from psyche_client.chain.program import Coordinator
from tests.integration.harness import FAST_CONFIG, Proc

from .localnet import start_localnet

CLI = [sys.executable, "-u", "-m", "psyche_client.cli.solana_client"]
pytestmark = pytest.mark.slow
SBF_ELF = Path(__file__).resolve().parents[2] / "sbf" / "psyche_coordinator.so"
EXTRA = 8  # waiting_for_members_extra_time of the tick test: room for the CLI calls before it


def cli(localnet, *args, keypair=None, check=True):
    cmd = [*CLI, *args, "--rpc", localnet.rpc_url]
    if keypair:
        cmd += ["--keypair", str(keypair)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def keypair(tmp_path, name, localnet=None, sol=None):
    path = tmp_path / f"{name}.json"
    save_keypair(Keypair(), path)
    if sol:
        cli(localnet, "airdrop", "--to", str(load_keypair(path).pubkey()), "--sol", str(sol),
            keypair=path)
    return path


def show(localnet, run_id):
    return json.loads(cli(localnet, "show", "--run-id", run_id, "--json").stdout)


def wait_for_chain_time(localnet, t: int, deadline: float = 120.0) -> int:
    """Polls the chain's clock (the Clock sysvar, which the program reads) until it shows `t`
    or later; returns it. The chain's clock is what counts, not this machine's."""
    async def wait():
        end = time.monotonic() + deadline
        async with AsyncClient(localnet.rpc_url) as c:
            while True:
                info = (await c.get_account_info(CLOCK)).value
                now = struct.unpack_from("<q", bytes(info.data), 32)[0]  # unix_timestamp
                if now >= t:
                    return now
                assert time.monotonic() < end, f"the chain's clock stayed at {now}, before {t}"
                await asyncio.sleep(0.2)
    return asyncio.run(wait())


def client(localnet, tmp_path, key, run_id, name, relay):
    """A chain client (simulated training) finding its peers by their keys on chain, through
    the run's `relay` (no shared directory)."""
    return Proc(name, [*CLI, "train", "--rpc", localnet.rpc_url, "--ws", localnet.ws_url,
                       "--keypair", str(key), "--run-id", run_id, "--iroh-relay", relay,
                       "--dummy-training-delay-secs", "0.3"])


@pytest.mark.timeout(900)
def test_three_clients_train_two_epochs_on_chain(localnet, tmp_path, iroh_relay):
    three_clients_train_two_epochs(localnet, tmp_path, iroh_relay)


@pytest.mark.timeout(900)
def test_three_clients_train_two_epochs_on_the_sbf_program(tmp_path, iroh_relay):
    """The same run on a chain whose coordinator program is the SBF build kept in the
    repository, under Solana's VM (`psyche-localnet --program-elf`), metered: each call within
    the compute budget its transaction asks for."""
    with start_localnet("--program-elf", str(SBF_ELF)) as sbf_chain:
        three_clients_train_two_epochs(sbf_chain, tmp_path, iroh_relay)
        # metered for real: the runtime's own line in a program call's log
        logs = asyncio.run(last_program_call_logs(sbf_chain))
        assert any(re.fullmatch(rf"Program {sbf_chain.program_id} consumed \d+ of \d+ "
                                r"compute units", line) for line in logs), logs


async def last_program_call_logs(localnet) -> list[str]:
    async with AsyncClient(localnet.rpc_url) as c:
        program = Pubkey.from_string(localnet.program_id)
        last = (await c.get_signatures_for_address(program, limit=1)).value[0]
        tx = (await c.get_transaction(last.signature, max_supported_transaction_version=0)).value
        return tx.transaction.meta.log_messages


def three_clients_train_two_epochs(localnet, tmp_path, iroh_relay):
    run_id = "e2e-chain"
    state = tmp_path / "state.toml"
    # epoch 8 s, 30 steps: the run spans 3 epochs (~1 s rounds) before it finishes
    state.write_text(tomli_w.dumps({"run_id": run_id, "run_seed": 11,
                                    "config": {**FAST_CONFIG, "total_steps": 30}}))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), "--permissioned", keypair=owner)
    assert show(localnet, run_id)["state"]["run_state"] == "WaitingForMembers"

    keys = [keypair(tmp_path, f"client-{n}", localnet, sol=10) for n in range(3)]
    for key in keys:
        cli(localnet, "authorize", "--run-id", run_id,
            "--grantee", str(load_keypair(key).pubkey()), keypair=owner)
    intruder = keypair(tmp_path, "intruder", localnet, sol=10)

    # no shared directory: each client reaches the others by their keys on chain, through the
    # run's relay
    procs = [client(localnet, tmp_path, k, run_id, f"client-{n}", iroh_relay)
             for n, k in enumerate(keys)]
    refused = client(localnet, tmp_path, intruder, run_id, "intruder", iroh_relay)
    try:
        # the unauthorized client's join_run is refused by name and it gives up
        assert refused.p.wait(timeout=240) == 2, refused.output()
        assert "NotAuthorized" in refused.output()
        for p in procs:
            p.wait_line(r"run finished", timeout=480)
            assert p.p.wait(timeout=60) == 0, p.output()
    finally:
        for p in procs + [refused]:
            p.stop()

    final = show(localnet, run_id)["state"]
    assert final["run_state"] == "Finished"
    intruder_key = str(load_keypair(intruder).pubkey())
    for p, key in zip(procs, keys):
        out = "\n".join(p.lines)
        # each client followed the account (PubSub), joined, witnessed and saw 2+ epochs
        assert "following coordinator account" in out, out
        assert "sent join" in out and "sent witness" in out, out
        for epoch in (0, 1, 2):
            assert f"RoundTrain epoch {epoch} " in out, out
    assert intruder_key not in json.dumps(final)


def test_a_tick_by_an_unrelated_keypair_advances_the_run(localnet, tmp_path):
    run_id = "e2e-tick"
    state = tmp_path / "state.toml"
    state.write_text(tomli_w.dumps({"run_id": run_id, "run_seed": 3, "config": {
        **FAST_CONFIG, "min_clients": 1, "init_min_clients": 1, "witness_nodes": 1,
        "waiting_for_members_extra_time": EXTRA}}))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), keypair=owner)

    # one member joins (directly through the program), then nobody but a stranger ticks
    member = Keypair()

    async def join():
        c = Coordinator(localnet.rpc_url, member)
        await c.airdrop(member.pubkey(), 10**9)
        inst = await c.fetch_instance(run_id)
        await c.send([c.ix_join_run(member.pubkey(), c.instance_key(run_id),
                                inst.coordinator_account, bytes(member.pubkey()))])
        await c.close()
    asyncio.run(join())
    waiting = show(localnet, run_id)["state"]
    assert waiting["run_state"] == "WaitingForMembers" and len(waiting["pending"]) == 1
    # once the chain's clock is past the grace time, only a tick moves the run on
    wait_for_chain_time(localnet, waiting["run_state_start"] + EXTRA)
    assert show(localnet, run_id)["state"]["run_state"] == "WaitingForMembers"

    stranger = keypair(tmp_path, "stranger", localnet, sol=1)
    cli(localnet, "tick", "--run-id", run_id, keypair=stranger)
    after = show(localnet, run_id)["state"]
    assert after["run_state"] == "Warmup", after
    assert str(load_keypair(stranger).pubkey()) not in json.dumps(after)
