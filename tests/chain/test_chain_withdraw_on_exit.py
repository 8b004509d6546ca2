"""A client that is told to exit (SIGTERM) withdraws from a run on the chain before it goes:
its entry in the epoch's clients is Withdrawn and its join for the next epoch is gone from
`pending`. Nothing on chain sees a process end: without the withdraw the entry stays Healthy
until the health checks drop it (Dropped, not Withdrawn) and the join stays pending."""

import asyncio
import signal
import time

import pytest
import tomli_w
from solders.pubkey import Pubkey

from psyche_client.chain.keys import load_keypair
from psyche_client.chain.program import Coordinator
from psyche_coordinator_core import ClientState, RunState
from tests.chain.test_chain_e2e import cli, client, keypair
from tests.integration.harness import FAST_CONFIG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
RUN_ID = "withdraw-on-exit"


def poll_state(localnet, payer, predicate, timeout, what, run_id=RUN_ID):
    """The run's coordinator account, read until `predicate` holds (what the clients read)."""
    async def go():
        c = Coordinator(localnet.rpc_url, load_keypair(payer),
                        Pubkey.from_string(localnet.program_id))
        try:
            account = (await c.fetch_instance(run_id)).coordinator_account
            end, st = time.monotonic() + timeout, None
            while time.monotonic() < end:
                st = await c.fetch_state(account)
                if predicate(st):
                    return st
                await asyncio.sleep(0.2)
        finally:
            await c.close()
        raise AssertionError(f"timed out waiting for {what}; last state: "
                             f"{st.run_state.name if st else None}")
    return asyncio.run(go())


def test_a_client_sent_sigterm_withdraws_on_chain(localnet, tmp_path, iroh_relay):
    state = tmp_path / "state.toml"
    state.write_text(tomli_w.dumps({"run_id": RUN_ID, "run_seed": 5, "config": FAST_CONFIG}))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), keypair=owner)
    keys = [keypair(tmp_path, f"client-{n}", localnet, sol=10) for n in range(3)]
    signers = [bytes(load_keypair(k).pubkey()) for k in keys]
    procs = [client(localnet, tmp_path, k, RUN_ID, f"client-{n}", iroh_relay)
             for n, k in enumerate(keys)]
    victim, leaver = procs[0], signers[0]
    try:
        # training, and the victim has joined the next epoch too: it is in both lists
        poll_state(localnet, owner, lambda s: (
            s.run_state in (RunState.RoundTrain, RunState.RoundWitness)
            and any(c.signer == leaver and c.state == ClientState.Healthy for c in s.clients)
            and s.pending_index(leaver) is not None), 240, "the victim training and pending")
        victim.kill(signal.SIGTERM)
        code = victim.p.returncode
        after = poll_state(localnet, owner, lambda s: True, 10, "the state")
    finally:
        for p in procs:
            p.stop()
        for p in procs:
            print(f"== {p.name}\n{p.output()}")  # shown by pytest only when the test fails

    (entry,) = [c for c in after.clients if c.signer == leaver]
    assert entry.state == ClientState.Withdrawn, entry
    assert after.pending_index(leaver) is None
    assert "withdrew from the run" in victim.output()
    assert code == 128 + signal.SIGTERM, victim.output()
    # the others stay in the run
    assert all(c.state == ClientState.Healthy for c in after.clients if c.signer != leaver)
