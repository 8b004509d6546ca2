"""`psyche-solana-client set-checkpoint --kind Stored`: the recorded snapshot's parameter hash
and step are options (--hash, --step), checked before any transaction is built."""

import asyncio

import pytest
from click.testing import CliRunner
from solders.keypair import Keypair

from psyche_client.chain.keys import save_keypair
from psyche_client.cli import solana_admin
from psyche_client.cli.solana_client import main
from psyche_coordinator_core import Checkpoint, CheckpointKind

HASH = "ab" * 32
LOCATION = "5e" * 32  # a snapshot's location: its manifest's SHA-256


class Sent(Exception):
    """Stops the command where it would send the transaction."""


@pytest.fixture
def invoke(tmp_path, monkeypatch):
    """Runs set-checkpoint in process; returns (result, the checkpoint it would send)."""
    key = tmp_path / "owner.json"
    save_keypair(Keypair(), key)
    sent = []

    class Owner:
        def ix_update(self, *owner, checkpoint):
            sent.append(checkpoint)
            raise Sent

    class Session:
        c = Owner()

        def owner(self):
            return ()

        async def send(self, *ixs):
            raise AssertionError("not reached: ix_update stops the command")

    def execute(rpc, me, body, run_id=None, load=True):
        try:
            asyncio.run(body(Session()))
        except Sent:
            pass

    monkeypatch.setattr(solana_admin, "execute", execute)

    def run(*args):
        result = CliRunner().invoke(main, ["set-checkpoint", "--run-id", "r", "--keypair",
                                           str(key), *args])
        return result, (sent[-1] if sent else None)
    return run


def test_stored_takes_its_hash_and_step(invoke):
    result, ck = invoke("--kind", "Stored", "--repo", LOCATION, "--hash", HASH, "--step", "42")
    assert result.exit_code == 0, result.output
    assert ck == Checkpoint(CheckpointKind.Stored, LOCATION, "", bytes.fromhex(HASH), 42)
    # the other kinds are as before: no hash, step 0
    result, ck = invoke("--kind", "Hub", "--repo", "org/m", "--revision", "r2")
    assert result.exit_code == 0, result.output
    assert ck == Checkpoint(CheckpointKind.Hub, "org/m", "r2")


@pytest.mark.parametrize("args, says", [
    (("--kind", "Stored", "--repo", LOCATION, "--step", "3"), "needs --hash"),
    (("--kind", "Stored", "--hash", HASH, "--step", "3"), "need a repo"),
    (("--kind", "Stored", "--repo", LOCATION, "--hash", "ab" * 31, "--step", "3"),
     "expected 64 hex digits"),
    (("--kind", "Stored", "--repo", LOCATION, "--hash", "zz" * 32, "--step", "3"),
     "expected 64 hex digits"),
    (("--kind", "Stored", "--repo", LOCATION, "--hash", "00" * 32, "--step", "3"),
     "needs its parameter hash"),
    (("--kind", "Stored", "--repo", LOCATION, "--hash", HASH, "--step", "-1"), "--step"),
    (("--kind", "Hub", "--repo", "org/m", "--hash", HASH), "for --kind Stored"),
])
def test_bad_stored_options_are_refused_before_any_transaction(invoke, args, says):
    result, ck = invoke(*args)
    assert result.exit_code == 2 and ck is None, result.output
    assert says in result.output, result.output
