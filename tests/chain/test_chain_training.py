"""Real training on the local chain: the run created with the CLI, 3 client processes train a
1.1M-parameter Llama with DisTrO for 100 steps, coordinated only by the program. Held-out loss
must fall by 30% and every client must hold identical parameters after every applied round
(the same checks as on the centralized backend)."""

import json

import pytest
import tomli_w

from tests.chain.test_chain_e2e import CLI, cli, keypair
from tests.integration.harness import Proc
from tests.integration.test_training import check_trained_together, read_metrics, run_tables

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def test_three_clients_train_a_llama_on_chain(localnet, tmp_path, data_dir, iroh_relay):
    tables = run_tables(data_dir, run_id="train-chain", lr=0.003, topk=32)
    # no server to host the token files: every client reads them (all on this machine)
    tables["data"] = {"kind": "local", "dir": str(data_dir / "train"), "token_size": 2,
                      "shuffle_seed": "5e" * 32, "heldout_dir": str(data_dir / "heldout"),
                      "heldout_sequences": 32}
    tables["p2p"] = {"relays": [iroh_relay]}  # clients read it from the spec on chain
    state = tmp_path / "state.toml"
    state.write_text(tomli_w.dumps(tables))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), keypair=owner)

    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in (1, 2, 3)}
    procs = {}
    try:
        for n in (1, 2, 3):
            key = keypair(tmp_path, f"client-{n}", localnet, sol=10)
            procs[n] = Proc(f"client-{n}", [
                *CLI, "train", "--rpc", localnet.rpc_url, "--ws", localnet.ws_url,
                "--keypair", str(key), "--run-id", "train-chain", "--torch-threads", "1",
                "--micro-batch-size", "8", "--metrics-file", str(metrics[n])])
        for n, p in procs.items():
            p.wait_line(r"run finished", timeout=1500)
            assert p.p.wait(60) == 0, p.output()
    finally:
        for p in procs.values():
            p.stop()
    end = json.loads(cli(localnet, "show", "--run-id", "train-chain", "--json").stdout)["state"]
    assert end["run_state"] == "Finished"
    check_trained_together({n: read_metrics(p) for n, p in metrics.items()}, end["step"])
