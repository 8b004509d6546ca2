"""psyche-localnet with --ledger, killed (SIGKILL) in the middle of a run and started again
with the same directory and ports: the run resumes where the chain left it (no acknowledged
transaction is lost) and its clients, reconnecting by themselves, take it to the end."""

import json
import signal
import socket

import pytest
import tomli_w

from tests.chain.localnet import localnet_binary
from tests.chain.test_chain_e2e import CLI, cli, keypair
from tests.integration.harness import FAST_CONFIG, Proc

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Net:
    """Enough of the localnet fixture's shape for the CLI helpers."""

    def __init__(self, rpc_port, ws_port):
        self.rpc_url = f"http://127.0.0.1:{rpc_port}"
        self.ws_url = f"ws://127.0.0.1:{ws_port}"


def test_a_killed_localnet_resumes_its_run(tmp_path, iroh_relay):
    rpc_port, ws_port = free_port(), free_port()
    cmd = [str(localnet_binary()), "--rpc-port", str(rpc_port), "--ws-port", str(ws_port),
           "--ledger", str(tmp_path / "ledger")]
    net = Net(rpc_port, ws_port)
    chain = Proc("localnet", cmd)
    chain.wait_line("ready")
    run_id = "restart"
    state = tmp_path / "state.toml"
    state.write_text(tomli_w.dumps({"run_id": run_id, "run_seed": 5,
                                    "config": {**FAST_CONFIG, "total_steps": 24}}))
    owner = keypair(tmp_path, "owner", net, sol=100)
    cli(net, "create-run", "--state", str(state), keypair=owner)
    clients = []
    try:
        for n in range(3):
            key = keypair(tmp_path, f"client-{n}", net, sol=10)
            clients.append(Proc(f"client-{n}", [
                *CLI, "train", "--rpc", net.rpc_url, "--ws", net.ws_url, "--keypair", str(key),
                "--run-id", run_id, "--iroh-relay", iroh_relay,
                "--dummy-training-delay-secs", "0.3"]))
        clients[0].wait_line(r"RoundTrain epoch 0 step 4", timeout=300)
        before = json.loads(cli(net, "show", "--run-id", run_id, "--json").stdout)["state"]
        chain.kill(signal.SIGKILL)

        chain = Proc("localnet", cmd)
        chain.wait_line("ready")
        after = json.loads(cli(net, "show", "--run-id", run_id, "--json").stdout)["state"]
        assert after["step"] >= before["step"], (before, after)
        assert after["epoch"] >= before["epoch"], (before, after)
        assert {c["pubkey"] for c in before["clients"]} == {c["pubkey"] for c in after["clients"]}
        for c in clients:
            c.wait_line(r"run finished", timeout=480)
            assert c.p.wait(60) == 0, c.output()
        end = json.loads(cli(net, "show", "--run-id", run_id, "--json").stdout)["state"]
        assert end["run_state"] == "Finished" and end["step"] > 24
    finally:
        for c in clients:
            c.stop()
        chain.stop()
