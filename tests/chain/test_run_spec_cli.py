"""The run's spec on chain, through psyche-solana-client against psyche-localnet: create-run
publishes it, clients read it (no file handed to them), a client whose own spec differs
refuses, set-spec replaces it only while the run is halted, half-written bytes are refused,
close-run closes its account."""

import asyncio

import pytest

from psyche_client.chain.keys import load_keypair
from psyche_client.chain.program import Coordinator
from psyche_client.chain.run_spec import fetch_run_spec
from psyche_client.server.state_file import load_run_spec, load_state_file
from tests.chain.test_cli import cli, make_env, on_chain, show, state_file

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(localnet, tmp_path_factory):
    return make_env(localnet, tmp_path_factory)

SPEC = """
[model]
vocab_size = 256
hidden_size = 32
num_layers = 1
num_heads = 2
num_kv_heads = 2
intermediate_size = 64
max_seq_len = 128

[optimizer]
lr = {lr}

[data]
kind = "local"
dir = "tokens/train"

[p2p]
relays = ["http://relay.example:3340"]
"""


def spec_state(env, run_id, lr=0.003):
    path = state_file(env, run_id)
    with open(path, "a") as f:
        f.write(SPEC.format(lr=lr))
    return path


def train(env, run_id, *args, code):
    return cli(env, "train", "--run-id", run_id, "--keypair", str(env.stranger), *args,
               code=code)


def test_the_spec_is_published_read_checked_and_replaced(env):
    run = "cli-spec"
    path = spec_state(env, run)
    local = load_run_spec(path, load_state_file(path))
    out = cli(env, "create-run", "--state", path)
    assert f"run spec {local.spec_hash().hex()}" in out.stdout
    assert show(env, run)["state"]["spec_hash"] == local.spec_hash().hex()
    assert local.spec_hash().hex() in cli(env, "show", "--run-id", run).stdout
    spec_hash, spec = on_chain(env, lambda c: fetch_run_spec(c, run))
    assert spec == local and spec_hash == local.spec_hash()
    assert spec.p2p.relays == ("http://relay.example:3340",)

    # a client handed another spec refuses before it joins, naming both
    other = spec_state(env, "cli-spec-other", lr=0.001)
    out = train(env, run, "--run-spec", other, code=2)
    theirs = load_run_spec(other, load_state_file(other)).spec_hash().hex()[:16]
    assert "SpecMismatch" in out.stderr and theirs in out.stderr
    assert local.spec_hash().hex()[:16] in out.stderr
    plain = state_file(env, "cli-spec-plain")  # no [model]: simulated training
    out = train(env, run, "--run-spec", plain, code=2)
    assert "SpecMismatch" in out.stderr and "simulated training" in out.stderr

    # replaced only while halted
    out = cli(env, "set-spec", "--run-id", run, "--state", other, code=1)
    assert "UpdateNotHalted" in out.stderr and "pause" in out.stderr
    cli(env, "pause", "--run-id", run)
    out = cli(env, "set-spec", "--run-id", run, "--state", other)
    assert show(env, run)["state"]["spec_hash"].startswith(theirs)
    assert on_chain(env, lambda c: fetch_run_spec(c, run))[1].optimizer.lr == 0.001

    # bytes rewritten without their hash (a creator midway through set-spec): refused by name
    async def rewrite():
        me = load_keypair(env.dir / "owner.json")
        c = Coordinator(env.localnet.rpc_url, me)
        try:
            await c.send(c.ix_set_run_spec(me.pubkey(), c.instance_key(run), b'{"model":{}}'))
        finally:
            await c.close()
    asyncio.run(rewrite())
    out = train(env, run, code=1)
    assert "rewriting it" in out.stderr and "set-spec" in out.stderr

    cli(env, "set-spec", "--run-id", run, "--state", plain)
    assert show(env, run)["state"]["spec_hash"] == "00" * 32
    assert on_chain(env, lambda c: fetch_run_spec(c, run)) == (bytes(32), None)

    # close-run closes the spec account too (free_run_spec), returning its rent with the run's
    async def spec_account(c):
        return await c.get_account_data(c.run_spec_key(c.instance_key(run)))
    assert on_chain(env, spec_account) is not None
    assert "closed run" in cli(env, "close-run", "--run-id", run).stdout
    assert on_chain(env, spec_account) is None
    assert on_chain(env, lambda c: c.fetch_instance(run)) is None


def test_a_spec_that_cannot_be_a_chain_runs_is_refused(env):
    path = spec_state(env, "cli-spec-server")
    text = open(path).read().replace('kind = "local"\ndir = "tokens/train"',
                                     'kind = "server"\naddress = "127.0.0.1:1"')
    open(path, "w").write(text)
    out = cli(env, "create-run", "--state", path, code=2)
    assert 'kind = "server"' in out.stderr
