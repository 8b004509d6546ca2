"""psyche-solana-client's run-creator commands, as real processes against psyche-localnet."""

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from psyche_client.chain.keys import load_keypair, save_keypair
from psyche_client.chain.program import Coordinator

ROOT = Path(__file__).resolve().parents[2]
STATE = (ROOT / "config/local/state.toml").read_text()
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(localnet, tmp_path_factory):
    return make_env(localnet, tmp_path_factory)


def make_env(localnet, tmp_path_factory):
    """A workdir with an owner keypair funded through the CLI and a funded stranger."""
    d = tmp_path_factory.mktemp("solana-cli")
    base = {k: v for k, v in os.environ.items() if not k.startswith("PSYCHE_")}
    e = type("Env", (), {})()
    e.dir, e.localnet = d, localnet
    e.vars = {**base, "PSYCHE_RPC": localnet.rpc_url, "PSYCHE_KEYPAIR": str(d / "owner.json")}
    out = cli(e, "new-keypair", str(d / "owner.json"))
    e.owner = out.stdout.strip()
    assert e.owner == str(load_keypair(d / "owner.json").pubkey())
    cli(e, "airdrop", "--sol", "100")
    e.stranger = d / "stranger.json"
    save_keypair(Keypair(), e.stranger)
    cli(e, "airdrop", "--to", str(load_keypair(e.stranger).pubkey()), "--sol", "1")
    return e


def cli(env, *args, code=0):
    out = subprocess.run([sys.executable, "-m", "psyche_client.cli.solana_client", *args],
                         capture_output=True, text=True, timeout=180, env=env.vars, cwd=env.dir)
    assert out.returncode == code, f"{args}: exit {out.returncode}\n{out.stdout}{out.stderr}"
    return out


def state_file(env, run_id, total_steps=20, config_extra=""):
    path = env.dir / f"{run_id}-{total_steps}.toml"
    text = STATE.replace('run_id = "local"', f'run_id = "{run_id}"')
    text = text.replace("[config]\n", f"[config]\n{config_extra}")
    path.write_text(text.replace("total_steps = 20", f"total_steps = {total_steps}"))
    return str(path)


def show(env, run_id):
    return json.loads(cli(env, "show", "--run-id", run_id, "--json").stdout)


def on_chain(env, fn):
    async def go():
        c = Coordinator(env.localnet.rpc_url, Keypair())
        try:
            return await fn(c)
        finally:
            await c.close()
    return asyncio.run(go())


def test_new_keypair_and_airdrop(env):
    path = env.dir / "k.json"
    first = cli(env, "new-keypair", str(path)).stdout.strip()
    refused = cli(env, "new-keypair", str(path), code=2)
    assert "exists" in refused.stderr and "--force" in refused.stderr
    second = cli(env, "new-keypair", str(path), "--force").stdout.strip()
    assert second != first == str(Pubkey.from_string(first))
    out = cli(env, "airdrop", "--keypair", str(path), "--sol", "2.5")
    assert f"to {second}; balance 2.5 SOL" in out.stdout


JOIN = dict(max_clients=4, max_syncing=2, kept_rounds=16, sync_warmup_rounds=3)


def test_run_lifecycle(env):
    run = "cli-lifecycle"
    join = "".join(f"{k} = {v}\n" for k, v in JOIN.items())  # the join settings reach the chain
    out = cli(env, "create-run", "--state", state_file(env, run, config_extra=join))

    async def instance_key(c):
        return c.instance_key(run)
    instance = on_chain(env, instance_key)
    assert f"run '{run}'" in out.stdout and str(instance) in out.stdout
    assert re.search(r"run state\s+WaitingForMembers", out.stdout)
    d = show(env, run)
    assert (d["instance"], d["main_authority"], d["join_authority"]) == (
        str(instance), env.owner, env.owner)
    assert d["permissionless"] and d["state"]["run_state"] == "WaitingForMembers"
    assert {k: d["state"]["config"][k] for k in JOIN} == JOIN
    assert (d["state"]["epoch"], d["state"]["step"], d["state"]["clients"]) == (0, 1, [])
    human = cli(env, "show", "--run-id", run).stdout
    assert d["coordinator_account"] in human and "total_steps = 20" in human

    refused = cli(env, "update-config", "--state", state_file(env, run, 33), code=1)
    assert "UpdateNotHalted" in refused.stderr and "pause" in refused.stderr
    refused = cli(env, "close-run", "--run-id", run, code=1)
    assert "CloseNotHalted" in refused.stderr

    assert "WaitingForMembers -> Paused" in cli(env, "pause", "--run-id", run).stdout
    assert show(env, run)["state"]["run_state"] == "Paused"
    refused = cli(env, "update-config", "--state", state_file(env, run, 33),
                  "--keypair", str(env.stranger), code=1)
    assert "NotAuthority" in refused.stderr and env.owner in refused.stderr
    cli(env, "update-config", "--state", state_file(env, run, 33))
    assert show(env, run)["state"]["config"]["total_steps"] == 33
    assert "need a repo" in cli(env, "set-checkpoint", "--run-id", run, "--kind", "Hub",
                                code=2).stderr
    cli(env, "set-checkpoint", "--run-id", run, "--kind", "Hub", "--repo", "org/m",
        "--revision", "r2")
    assert show(env, run)["state"]["checkpoint"] == {"kind": "Hub", "repo": "org/m",
                                                     "revision": "r2", "hash": "00" * 32,
                                                     "step": 0}

    assert "Paused -> WaitingForMembers" in cli(env, "resume", "--run-id", run).stdout
    ticked = cli(env, "tick", "--run-id", run, "--keypair", str(env.stranger)).stdout
    assert "WaitingForMembers (step 1) -> WaitingForMembers (step 1)" in ticked

    cli(env, "pause", "--run-id", run)
    assert "closed run" in cli(env, "close-run", "--run-id", run).stdout
    assert on_chain(env, lambda c: c.fetch_instance(run)) is None
    assert "no run" in cli(env, "show", "--run-id", run, code=1).stderr


def test_duplicate_run_id_is_refused(env):
    path = state_file(env, "cli-duplicate")
    with open(path, "a") as f:  # a non-Dummy checkpoint is set in the creating transaction
        f.write('repo = "org/base"\n')
    Path(path).write_text(Path(path).read_text().replace('kind = "Dummy"', 'kind = "P2P"'))
    cli(env, "create-run", "--state", path, "--no-start")
    st = show(env, "cli-duplicate")["state"]
    assert st["run_state"] == "Uninitialized" and st["checkpoint"]["repo"] == "org/base"
    refused = cli(env, "create-run", "--state", path, code=1)
    assert "'cli-duplicate' is taken" in refused.stderr
    assert "AccountAlreadyInUse" in refused.stderr


def test_permissioned_run_authorize_and_revoke(env):
    run = "cli-permissioned"
    cli(env, "create-run", "--state", state_file(env, run), "--permissioned")
    assert show(env, run)["permissionless"] is False
    grantee = Keypair().pubkey()

    def authorization(c):
        return c.get_account_data(c.authorization_key(c.instance_key(run), grantee))

    refused = cli(env, "authorize", "--run-id", run, "--grantee", str(grantee),
                  "--keypair", str(env.stranger), code=1)
    assert "NotJoinAuthority" in refused.stderr
    cli(env, "authorize", "--run-id", run, "--grantee", str(grantee))
    assert on_chain(env, authorization) is not None
    cli(env, "revoke", "--run-id", run, "--grantee", str(grantee))
    assert on_chain(env, authorization) is None
    assert "nothing to revoke" in cli(env, "revoke", "--run-id", run, "--grantee",
                                      str(grantee), code=1).stderr


def test_bad_input_exits_2_with_one_line(env):
    bad = state_file(env, "cli-bad", total_steps=0)
    out = cli(env, "create-run", "--state", bad, code=2)
    assert "total_steps" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    typo = state_file(env, "cli-typo", config_extra="totl_steps = 3\n")
    assert "totl_steps" in cli(env, "create-run", "--state", typo, code=2).stderr
    assert "--grantee" in cli(env, "authorize", "--run-id", "x", "--grantee", "nope",
                              code=2).stderr
    assert "--run-id is required" in cli(env, "pause", code=2).stderr
    out = cli(env, "create-run", code=2)
    assert "Missing option '--state'" in out.stderr and len(out.stderr.splitlines()) == 1


def test_unfunded_payer_and_unreachable_chain(env):
    poor = env.dir / "poor.json"
    save_keypair(Keypair(), poor)
    out = cli(env, "create-run", "--state", state_file(env, "cli-poor"), "--keypair", str(poor),
              code=1)
    assert "AccountNotFound" in out.stderr and "airdrop" in out.stderr
    out = cli(env, "show", "--run-id", "x", "--rpc", "http://127.0.0.1:1", code=1)
    assert "http://127.0.0.1:1" in out.stderr
