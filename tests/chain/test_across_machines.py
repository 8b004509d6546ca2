"""The README's "Run across machines", in network namespaces made by the test
(tests/p2p/netlab.py): the local chain and the token files' HTTP server on one address of an
"internet", the relay and a STUN server (coturn) on another; four clients behind three home
routers, every home link with 50 ms of delay and 1 % loss each way:

- A and B behind endpoint-independent NATs (they end direct with each other),
- C behind a symmetric NAT (relayed),
- D on A's home network, whose firewall lets it reach the chain, the token files and A only:
  not the relay, not B or C. It gets every result through A's forwarding, given A's address
  (`--p2p-peer`).

The run is made with `create-run` (its spec, relay and STUN server on chain); the clients get
only the RPC URL and the run id, and bind the default p2p port. They train a small Llama to the
end, with bit-identical parameters on all four after every applied round, A and B on a direct
path, C relayed, D on its path to A alone (each client logs the paths it used). Skips only
where network namespaces cannot be made."""

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
import tomli_w

from tests.chain.localnet import start_localnet
from tests.integration.harness import Proc
from tests.integration.test_training import applied_params, read_metrics
from tests.p2p.test_nat import P2P_PORT, RELAY_PORT, STUN_PORT, start_stun

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(2400)]

RUN_ID = "across"
STEPS = 24
# psyche-solana-client, as the README runs it; without the loopback p2p settings that
# tests/conftest.py gives every other test's clients: a contributor's defaults (every
# interface, port 29400)
CLI = ["env", "-u", "PSYCHE_BIND_P2P_HOST", "-u", "PSYCHE_BIND_P2P_PORT", sys.executable, "-m",
       "psyche_client.cli.solana_client"]


def tables(data_url, data_dir, relay, stun):
    """The run's state.toml: its token files are `data_dir`'s, served at `data_url`."""
    def urls(part):
        return [f"{data_url}/{part}/{f}" for f in sorted(os.listdir(data_dir / part))]
    return {
        "run_id": RUN_ID, "run_seed": 4242,
        "config": dict(warmup_time=180, cooldown_time=2, max_round_train_time=90,
                       round_witness_time=2, epoch_time=100000, total_steps=STEPS,
                       max_seq_len=128, min_clients=4, init_min_clients=4, witness_nodes=0,
                       global_batch_size_start=16, global_batch_size_end=16,
                       waiting_for_members_extra_time=1),
        "model": dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4,
                      num_kv_heads=4, intermediate_size=256, max_seq_len=128),
        "optimizer": dict(kind="distro", warmup_steps=4, chunk=64, topk=32, lr=0.003),
        "data": dict(kind="http", urls=urls("train"), heldout_urls=urls("heldout"),
                     token_size=2, heldout_sequences=16, manifest=f"{data_url}/manifest.json"),
        "p2p": dict(relays=[relay], stun=[stun]),
    }


def in_ns(ns, *cmd):
    out = subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                         timeout=180)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[:3])}: exit {out.returncode}\n{out.stdout}"
                             f"{out.stderr}")
    return out.stdout + out.stderr


def test_four_clients_behind_nats_train_to_the_end(nat_lab, tmp_path, data_dir):
    from psyche_client.chain.keys import load_keypair
    from psyche_client.p2p.relay_server import start_relay

    (a, d), (b,), (c,) = nat_lab.home("eim", hosts=2), nat_lab.home("eim"), nat_lab.home("sym")
    chain_ip, relay_ip = nat_lab.public_ip, nat_lab.public_address()
    nat_lab.block(d, allow=[chain_ip, nat_lab.address(a)])

    data = subprocess.Popen(["ip", "netns", "exec", nat_lab.public, sys.executable, "-m",
                             "psyche_client.cli.data", "serve-http", str(data_dir), "--host",
                             chain_ip, "--port", "8000"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    stun = start_stun(nat_lab, relay_ip)
    procs = {}
    try:
        # the default ports, as the README's contributors assume (PubSub = RPC + 1)
        with start_localnet("--bind-address", chain_ip, netns=nat_lab.public, rpc_port=8899,
                            ws_port=8900) as chain, \
                start_relay(relay_ip, RELAY_PORT, netns=nat_lab.public) as relay:
            rpc = chain.rpc_url
            state = tmp_path / "state.toml"
            state.write_text(tomli_w.dumps(tables(f"http://{chain_ip}:8000", data_dir, relay,
                                                  f"{relay_ip}:{STUN_PORT}")))
            owner = tmp_path / "owner.json"
            in_ns(nat_lab.public, *CLI, "new-keypair", str(owner))
            in_ns(nat_lab.public, *CLI, "airdrop", "--rpc", rpc, "--keypair", str(owner),
                  "--sol", "100")
            created = in_ns(nat_lab.public, *CLI, "create-run", "--rpc", rpc, "--keypair",
                            str(owner), "--state", str(state))
            # the data manifest psyche-data tokenize wrote, pinned by its hash: every client
            # checks every chunk it reads against it
            pinned = hashlib.sha256((data_dir / "manifest.json").read_bytes()).hexdigest()
            assert f"sha256 {pinned}, pinned in the run spec" in created, created
            keys = {}
            for n in "abcd":
                keys[n] = tmp_path / f"{n}.json"
                in_ns(nat_lab.public, *CLI, "new-keypair", str(keys[n]))
                in_ns(nat_lab.public, *CLI, "airdrop", "--rpc", rpc, "--keypair", str(owner),
                      "--to", str(load_keypair(keys[n]).pubkey()), "--sol", "10")
            ids = {n: bytes(load_keypair(keys[n]).pubkey()).hex() for n in keys}
            extra = {"a": ["--p2p-peer", f"{ids['d']}@{nat_lab.address(d)}:{P2P_PORT}"],
                     "d": ["--p2p-peer", f"{ids['a']}@{nat_lab.address(a)}:{P2P_PORT}"]}
            metrics = {n: tmp_path / f"{n}.jsonl" for n in keys}
            for n, host in zip("abcd", (a, b, c, d)):
                procs[n] = Proc(f"client-{n}", [
                    "ip", "netns", "exec", host, *CLI, "train", "--rpc", rpc, "--keypair",
                    str(keys[n]), "--run-id", RUN_ID, "--torch-threads", "1",
                    "--micro-batch-size", "4", "--metrics-file", str(metrics[n]),
                    *extra.get(n, [])])
            started = time.monotonic()
            for n, p in procs.items():
                p.wait_line(r"run finished", timeout=1800)
                assert p.p.wait(60) == 0, p.output()
            took = time.monotonic() - started
            paths = {n: p.wait_line(r"p2p paths: ([^;]*);", timeout=60).group(1)
                     for n, p in procs.items()}
    finally:
        for p in procs.values():
            p.stop()
        stun.kill()
        data.kill()
        stun.wait()
        data.wait()
    # the path each client last used to each peer: hole punching through the two
    # endpoint-independent NATs, the relay for the symmetric one, D's LAN path to A only
    short = {ids[n][:8]: n for n in ids}
    seen = {n: {short[k]: v for k, v in (kv.split("=") for kv in line.split(", "))}
            for n, line in paths.items()}
    assert seen == {"a": {"b": "direct", "c": "relay", "d": "direct"},
                    "b": {"a": "direct", "c": "relay"},
                    "c": {"a": "relay", "b": "relay"},
                    "d": {"a": "direct"}}, paths
    logs = {n: read_metrics(path) for n, path in metrics.items()}
    applied = applied_params(logs)
    assert len(applied) >= STEPS - 2, sorted(applied)
    for step, by_client in applied.items():
        assert set(by_client) == set("abcd"), f"step {step} applied by {sorted(by_client)}"
        assert len(set().union(*by_client.values())) == 1, f"step {step}: parameters differ"
    heldout = sorted((r["step"], r["loss"]) for r in logs["a"] if r["event"] == "heldout")
    assert heldout[-1][1] < heldout[0][1], heldout
    print(json.dumps({"seconds": round(took), "steps": len(applied), "heldout": heldout,
                      "paths": seen}))
