"""A join beyond the run's capacity (`max_clients`) on the chain: the program refuses it with
RunFull, and the Solana client says so in plain words and exits non-zero instead of sending
join_run again forever."""

import pytest
import tomli_w

from psyche_client.chain.keys import load_keypair
from psyche_coordinator_core import ClientState, RunState
from tests.chain.test_chain_e2e import cli, client, keypair
from tests.chain.test_chain_withdraw_on_exit import poll_state
from tests.integration.harness import FAST_CONFIG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
RUN_ID = "run-full-chain"


def test_a_solana_client_joining_a_full_run_says_so_and_exits(localnet, tmp_path, iroh_relay):
    state = tmp_path / "state.toml"
    config = {**FAST_CONFIG, "max_clients": 2, "init_min_clients": 2, "min_clients": 2}
    state.write_text(tomli_w.dumps({"run_id": RUN_ID, "run_seed": 9, "config": config}))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), keypair=owner)
    keys = [keypair(tmp_path, f"client-{n}", localnet, sol=10) for n in range(3)]
    members = {bytes(load_keypair(k).pubkey()) for k in keys[:2]}
    procs = [client(localnet, tmp_path, k, RUN_ID, f"client-{n}", iroh_relay)
             for n, k in enumerate(keys[:2])]
    try:
        poll_state(localnet, owner, lambda s: s.run_state == RunState.RoundTrain and {
            c.signer for c in s.clients if c.state == ClientState.Healthy} == members, 240,
            "the two members training", run_id=RUN_ID)
        late = client(localnet, tmp_path, keys[2], RUN_ID, "late", iroh_relay)
        procs.append(late)
        code = late.p.wait(timeout=120)
    finally:
        for p in procs:
            p.stop()
        for p in procs:
            print(f"== {p.name}\n{p.output()}")  # shown by pytest only when the test fails

    assert code == 2, late.output()
    assert "error: the run is full: 2 of 2 clients; try again later" in late.output()
