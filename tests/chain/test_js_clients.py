"""The local chain through web3.js and Anchor's TypeScript client (tests/js/localnet.test.cjs):
a run created here, read back, listed, ticked by a stranger, an unauthorized set_paused refused
as an AnchorError by name, simulation logs, the tick's transaction and signatures, account and
logs subscriptions. Node's packages come from scripts/js-deps (a cache outside the clone)."""

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from solders.keypair import Keypair

from psyche_client.chain.program import Coordinator
from tests.chain.test_program_client import create_run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def node_modules() -> str:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("Node.js is missing (apt-get install nodejs npm): the JavaScript test needs it")
    done = subprocess.run([str(ROOT / "scripts/js-deps")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_web3js_and_anchor_ts_drive_the_local_chain(localnet, tmp_path):
    modules = node_modules()
    run_id, owner, account = "js-clients", Keypair(), Keypair()

    async def create():
        c = Coordinator(localnet.rpc_url, owner)
        try:
            await c.airdrop(owner.pubkey(), 100 * 10**9)
            inst = await create_run(c, run_id, account, permissionless=True)
            await c.send([c.ix_set_paused(owner.pubkey(), inst, account.pubkey(), False)])
            return inst
        finally:
            await c.close()
    instance = asyncio.run(create())
    cfg = tmp_path / "js.json"
    cfg.write_text(json.dumps({"rpc": localnet.rpc_url, "ws": localnet.ws_url,
                               "idl": str(ROOT / "idl/psyche_coordinator.json"),
                               "runId": run_id, "instance": str(instance),
                               "account": str(account.pubkey())}))
    out = subprocess.run(["node", "--test", "--test-force-exit", "--test-reporter=spec",
                          str(ROOT / "tests/js/localnet.test.cjs")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NODE_PATH": modules, "PSYCHE_JS_CONFIG": str(cfg)})
    print(out.stdout[-6000:])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "# fail 0" in out.stdout or "fail 0" in out.stdout
