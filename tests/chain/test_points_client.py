"""Contributor points from the Python chain client, without a chain: the contributor account's
address and decoding, the instructions' accounts, the backend's join/settle arguments, and the
points commands' refusals of bad input (exit 2 before anything is read from the chain)."""

import struct

import pytest
from click.testing import CliRunner
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.system_program import ID as SYSTEM_PROGRAM_ID

from psyche_client.backends.solana import SolanaBackend
from psyche_client.chain.keys import save_keypair
from psyche_client.chain.program import (
    CONTRIBUTOR_DISCRIMINATOR,
    CONTRIBUTOR_INSTANCE_OFFSET,
    ChainError,
    Coordinator,
    decode_contributor,
)
from psyche_client.cli.solana_client import main
from psyche_coordinator_core import Points, RunConfig, new_run
from psyche_coordinator_core.coordinator import join

RPC = "http://127.0.0.1:9"  # nothing listens: any read would fail with exit 1, not 2


def contributor_bytes(instance, identity, delegates, counts, bump=254, pad=0):
    return (CONTRIBUTOR_DISCRIMINATOR + bytes([bump]) + bytes(instance) + bytes(identity)
            + struct.pack("<I", len(delegates)) + b"".join(bytes(d) for d in delegates)
            + struct.pack("<6Q", *counts) + bytes(pad))


def test_contributor_account_decodes_to_points_and_delegates():
    instance, identity = Keypair().pubkey(), Keypair().pubkey()
    delegates = [Keypair().pubkey() for _ in range(3)]
    counts = (7, 40, 40 * 512, 123, 7, 2**64 - 1)
    # Anchor allocates the account for 8 delegates: a shorter list leaves zeros at the end
    data = contributor_bytes(instance, identity, delegates, counts, pad=5 * 32)
    c = decode_contributor(data)
    assert c.coordinator_instance == instance and c.identity == identity
    assert c.delegates == tuple(delegates)
    assert c.points == Points(bytes(identity), *counts)
    assert data[CONTRIBUTOR_INSTANCE_OFFSET:CONTRIBUTOR_INSTANCE_OFFSET + 32] == bytes(instance)
    with pytest.raises(ChainError, match="not a contributor account"):
        decode_contributor(bytes(8) + data[8:])
    with pytest.raises(ChainError, match="malformed"):
        decode_contributor(data[:80])
    nine = contributor_bytes(instance, identity, [identity] * 9, counts)
    with pytest.raises(ChainError, match="9 delegates"):
        decode_contributor(nine)


def test_the_decoding_agrees_with_the_idl():
    instance, identity, delegate = (Keypair().pubkey() for _ in range(3))
    counts = (1, 2, 3, 4, 5, 6)
    data = contributor_bytes(instance, identity, [delegate], counts, bump=7, pad=7 * 32)
    anchor = Coordinator(RPC, Keypair()).program.coder.accounts.decode(data)
    ours = decode_contributor(data)
    assert (anchor.bump, anchor.coordinator_instance, anchor.identity, list(anchor.delegates)) \
        == (7, ours.coordinator_instance, ours.identity, list(ours.delegates))
    assert (anchor.presence_rounds, anchor.sequences, anchor.tokens, anchor.token_carry,
            anchor.presence_points, anchor.compute_points) == counts


def test_contributor_address_is_the_pda_of_run_and_identity():
    c = Coordinator(RPC, Keypair())
    instance, identity = c.instance_key("r"), Keypair().pubkey()
    expected = Pubkey.find_program_address([b"contributor", bytes(instance), bytes(identity)],
                                           c.program_id)[0]
    assert c.contributor_key(instance, identity) == expected
    assert c.contributor_key(instance, Keypair().pubkey()) != expected


def metas(ix):
    return [(m.pubkey, m.is_signer, m.is_writable) for m in ix.accounts]


def test_points_instructions_name_the_contributor_accounts():
    payer, identity, user = Keypair(), Keypair().pubkey(), Keypair().pubkey()
    c = Coordinator(RPC, payer)
    inst, acct = c.instance_key("r"), Keypair().pubkey()
    own, other = c.contributor_key(inst, user), c.contributor_key(inst, identity)

    ix = c.ix_join_run(user, inst, acct, bytes(32))
    assert [m[0] for m in metas(ix)] == [user, inst, acct, c.program_id, own, SYSTEM_PROGRAM_ID]
    assert ix.data.endswith(bytes(32) + bytes(user))  # p2p_identity, identity = the signer
    ix = c.ix_join_run(user, inst, acct, bytes(32), identity=identity)
    assert metas(ix)[4] == (other, False, True) and ix.data.endswith(bytes(identity))

    ds = [Keypair().pubkey() for _ in range(2)]
    ix = c.ix_set_delegates(identity, inst, ds)
    assert metas(ix) == [(payer.pubkey(), True, True), (identity, True, False),
                         (inst, False, False), (other, False, True),
                         (SYSTEM_PROGRAM_ID, False, False)]
    assert ix.data[8:] == struct.pack("<I", 2) + bytes(ds[0]) + bytes(ds[1])

    ix = c.ix_settle_points(user, inst, acct, 3, identity)
    assert [m[0] for m in metas(ix)] == [user, inst, acct, other]
    assert metas(ix)[3][2] and ix.data[8:] == struct.pack("<I", 3) + bytes(identity)


def test_backend_joins_as_the_identity_and_settles_to_the_slot_identity():
    me, identity = Keypair(), Keypair().pubkey()
    b = SolanaBackend(RPC, "ws://127.0.0.1:9", "r", me)
    b.account = Keypair().pubkey()
    c = b.coordinator
    ix = b._instruction("join", {"p2p_identity": bytes(32)})
    assert ix.accounts[4].pubkey == c.contributor_key(b.instance_key, me.pubkey())
    ix = b._instruction("join", {"p2p_identity": bytes(32), "identity": bytes(identity)})
    assert ix.accounts[4].pubkey == c.contributor_key(b.instance_key, identity)

    st = new_run("r", RunConfig(), 1)
    join(st, 0, bytes(Keypair().pubkey()), bytes(32), identity=bytes(identity))
    st.clients = list(st.pending)
    b._latest = st
    ix = b._instruction("settle", {"index": 0})
    assert ix.accounts[3].pubkey == c.contributor_key(b.instance_key, identity)


@pytest.fixture
def run_cli(tmp_path, monkeypatch):
    monkeypatch.delenv("PSYCHE_KEYPAIR", raising=False)
    monkeypatch.setenv("PSYCHE_RPC", RPC)
    key = tmp_path / "id.json"
    save_keypair(Keypair(), key)

    def go(*args):
        out = CliRunner().invoke(main, [a.replace("KEY", str(key)) for a in args])
        return out.exit_code, out.output
    return go


@pytest.mark.parametrize("args, message", [
    (("settle", "--run-id", "r"), "exactly one of --index N and --all"),
    (("settle", "--run-id", "r", "--index", "1", "--all"), "exactly one of"),
    (("settle", "--index", "1"), "--run-id is required"),
    (("settle", "--run-id", "r", "--index", "-1"), "0<=x<=255"),
    (("set-delegates", "--run-id", "r", "--identity-keypair", "KEY"), "at least one"),
    (("set-delegates", "--run-id", "r", "--identity-keypair", "KEY", "nope"),
     "not a base58 public key"),
    (("set-delegates", "--run-id", "r", "--identity-keypair", "KEY",
      *[str(Keypair().pubkey()) for _ in range(9)]), "TooManyDelegates"),
    (("set-delegates", "--run-id", "r", "--identity-keypair", "KEY", *[str(Pubkey.default())] * 2),
     "listed twice"),
    (("set-delegates", "--run-id", "r", "--identity-keypair", "/nonexistent/id.json",
      str(Pubkey.default())), "/nonexistent/id.json"),
    (("set-delegates", "--identity-keypair", "KEY", str(Pubkey.default())),
     "--run-id is required"),
    (("set-delegates", "--run-id", "r", str(Pubkey.default())), "--identity-keypair"),
    (("leaderboard",), "--run-id is required"),
    (("train", "--keypair", "KEY", "--run-id", "r", "--identity", "zz"),
     "--identity 'zz': not a base58 public key"),
])
def test_points_commands_refuse_bad_input(run_cli, args, message):
    code, out = run_cli(*args)
    assert code == 2, out
    assert message in out, out


def test_leaderboard_without_a_chain_is_exit_1(run_cli):
    code, out = run_cli("leaderboard", "--run-id", "r")
    assert code == 1 and "psyche-localnet" in out, out
