"""The centralized server's half of contributor points (docs/points.md): the ledger credited in
the settle's commit and saved with the state, delegations, the leaderboard query. In process:
the server's methods directly, and one real websocket on loopback."""

import asyncio
import hashlib
import json

import pytest

from psyche_client.backends.base import BackendError, FatalBackendError
from psyche_client.backends.centralized import CentralizedBackend
from psyche_client.delegation import Delegation, DelegationError, delegation_message
from psyche_client.identity import Identity
from psyche_client.ledger import ledger_from_json, ledger_to_json
from psyche_client.server.coordinator_server import CoordinatorServer
from psyche_client.server.persistence import LEDGER_MAGIC, StateStore
from psyche_coordinator_core import (
    Client,
    CoordinatorError,
    Credit,
    LayoutError,
    Points,
    RunConfig,
    RunState,
    apply,
    credit,
    new_run,
    to_bytes,
)

CONFIG = RunConfig(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
                   epoch_time=15, total_steps=30, max_seq_len=16, min_clients=2,
                   init_min_clients=3, witness_nodes=0, global_batch_size_start=8,
                   global_batch_size_end=8, waiting_for_members_extra_time=1,
                   presence_points=2, tokens_per_compute_point=100, flops_per_token=1000)


def key(n) -> Identity:
    return Identity(hashlib.sha256(b"points-test-%d" % n).digest())


def cooldown_state(slots):
    """A run in Cooldown whose slots hold [(signer, identity, presence, sequences)]."""
    s = apply(new_run("pts", CONFIG, 5), 1000, "resume")
    s.clients = [Client(sig, sig, identity=ident, presence=p, sequences=q)
                 for sig, ident, p, q in slots]
    s.run_state, s.run_state_start, s.epoch = RunState.Cooldown, 1000, 1
    return s


A, B, C = key(1).public, key(2).public, key(3).public  # A and B act for identity C below


def test_settle_credits_the_identity_in_the_same_commit_and_saves_it(tmp_path):
    store = StateStore(tmp_path)
    state = cooldown_state([(A, C, 10, 3), (B, C, 7, 5), (C, C, 1, 0)])
    server = CoordinatorServer(state, store, clock=lambda: 1000.5)
    server.apply_op("settle", {"index": 0})
    # 10 rounds x 2 points; 3 sequences x 16 tokens = 48 tokens, below 100: no compute point yet
    assert server.ledger == {C: Points(C, 10, 3, 48, 48, 20, 0)}
    assert server.state.clients[0].presence == 0 and server.state.clients[0].sequences == 0
    assert store.load_all() == (server.state, server.ledger)  # durable before the ack
    server.apply_op("settle", {"index": 1})  # another node key of the same identity
    server.apply_op("settle", {"index": 2})
    # 18 rounds x 2 = 36; 8 sequences = 128 tokens: 1 compute point, 28 carried
    assert server.ledger == {C: Points(C, 18, 8, 128, 28, 36, 1)}
    assert server.ledger[C] == credit(credit(credit(None, Credit(C, 10, 3), CONFIG),
                                             Credit(C, 7, 5), CONFIG), Credit(C, 1, 0), CONFIG)
    with pytest.raises(CoordinatorError) as e:  # nothing counted twice
        server.apply_op("settle", {"index": 0})
    assert e.value.code == "NothingToSettle" and server.ledger[C].presence_rounds == 18
    with pytest.raises(CoordinatorError) as e:
        server.apply_op("settle", {"index": 9})
    assert e.value.code == "InvalidClientIndex"

    # a restarted server reads the same state and ledger back
    state2, ledger2 = StateStore(tmp_path).load_all()
    again = CoordinatorServer(state2, store, ledger=ledger2)
    assert again.ledger == server.ledger and to_bytes(again.state) == to_bytes(server.state)
    assert again.leaderboard()["ledger"] == ledger_to_json(server.ledger)


def test_leaderboard_adds_what_the_slots_hold_now():
    server = CoordinatorServer(cooldown_state([(A, C, 4, 2), (B, B, 3, 0)]), clock=lambda: 1000)
    server.apply_op("settle", {"index": 0})
    server.state.clients[0] = Client(A, A, identity=C, presence=1, sequences=10)
    board = server.leaderboard()
    assert ledger_from_json(board["settled"]) == {C: Points(C, 4, 2, 32, 32, 8, 0)}
    assert ledger_from_json(board["ledger"]) == {
        C: Points(C, 5, 12, 192, 92, 10, 1), B: Points(B, 3, 0, 0, 0, 6, 0)}


def test_state_only_files_load_with_an_empty_ledger_and_corrupt_ledgers_are_errors(tmp_path):
    store = StateStore(tmp_path)
    state = cooldown_state([(A, A, 1, 1)])
    store.path.write_bytes(to_bytes(state))  # written before points had a ledger
    assert store.load_all() == (state, {}) and store.load() == state
    store.save(state, {})
    assert store.path.read_bytes() == to_bytes(state)  # an empty ledger adds nothing
    for tail in (b"garbage", LEDGER_MAGIC + b"{not json", LEDGER_MAGIC + b'{"zz": {}}',
                 LEDGER_MAGIC + json.dumps({A.hex(): {"tokens": -1}}).encode()):
        store.path.write_bytes(to_bytes(state) + tail)
        with pytest.raises(LayoutError, match="saved state is not valid"):
            store.load_all()


def test_ledger_json_round_trip_keeps_u64():
    big = (1 << 64) - 1
    ledger = {A: Points(A, big, 2, 3, 4, 5, big), C: Points(C)}
    assert ledger_from_json(json.loads(json.dumps(ledger_to_json(ledger)))) == ledger


def test_delegation_sign_verify_and_refusals(tmp_path):
    contributor, node, other = key(10), key(11), key(12)
    d = Delegation.sign(contributor, "run-a", node.public)
    assert d.problem("run-a", node.public) is None
    assert d.signature == contributor.sign(b"psyche-delegation-v1\0run-a\0" + node.public)
    assert delegation_message("run-a", node.public).startswith(b"psyche-delegation-v1\0")
    assert "run 'run-a', not 'run-b'" in d.problem("run-b", node.public)
    assert "not " + other.public.hex()[:16] in d.problem("run-a", other.public)
    forged = Delegation("run-a", contributor.public, other.public,
                        other.sign(delegation_message("run-a", other.public)))
    assert "signature" in forged.problem("run-a", other.public)
    # one run's delegation cannot be replayed for another: the run is signed
    moved = Delegation("run-b", d.identity, d.delegate, d.signature)
    assert "signature" in moved.problem("run-b", node.public)
    path = tmp_path / "d.json"
    d.save(path)
    assert Delegation.load(path) == d
    path.write_text('{"run_id": "x"}')
    with pytest.raises(DelegationError, match="needs run_id"):
        Delegation.load(path)
    with pytest.raises(DelegationError):
        Delegation.sign(contributor, "run-a", b"short")


async def _serve(server):
    started = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(server.run("127.0.0.1", 0, started=started.set_result))
    return task, await asyncio.wait_for(started, 30)


async def _delegates_over_websocket():
    contributor, node, stranger = key(20), key(21), key(22)
    state = apply(new_run("pts", CONFIG, 5), 1000, "resume")
    server = CoordinatorServer(state, withdraw_on_disconnect=False)
    task, port = await _serve(server)
    url = f"ws://127.0.0.1:{port}"
    try:
        good = CentralizedBackend(url, "pts", node, node.public, None,
                                  delegation=Delegation.sign(contributor, "pts", node.public))
        await good.connect()
        await good.send("join", {"signer": node.public, "p2p_identity": node.public,
                                 "identity": contributor.public})
        assert server.state.pending[-1].identity == contributor.public

        # no delegation: refused with a named error, before the core sees it
        bare = CentralizedBackend(url, "pts", stranger, stranger.public, None)
        await bare.connect()
        with pytest.raises(BackendError, match="NotADelegate"):
            await bare.send("join", {"signer": stranger.public, "p2p_identity": stranger.public,
                                     "identity": contributor.public})
        assert stranger.public not in [c.signer for c in server.state.pending]
        await bare.send("join", {"signer": stranger.public, "p2p_identity": stranger.public})

        # a delegation to another key: the hello is refused and the client told why, for good
        wrong = CentralizedBackend(url, "pts", stranger, stranger.public, None, reconnect=False,
                                   delegation=Delegation.sign(contributor, "pts", node.public))
        await wrong.connect()
        with pytest.raises(FatalBackendError, match="BadDelegation"):
            await asyncio.wait_for(_drain(wrong), 30)

        # observers may ask for the leaderboard; unknown queries are named errors
        server.state.clients = [Client(node.public, node.public, identity=contributor.public,
                                       presence=3)]
        watcher = CentralizedBackend(url, "pts", observer=True)
        await watcher.connect()
        board = await watcher.query("leaderboard")
        assert ledger_from_json(board["ledger"]) == {
            contributor.public: Points(contributor.public, 3, 0, 0, 0, 6, 0)}
        assert board["settled"] == {}
        with pytest.raises(BackendError, match="UnknownQuery"):
            await watcher.query("secrets")
        for b in (good, bare, wrong, watcher):
            await b.close()
    finally:
        task.cancel()


async def _drain(backend):
    while True:
        await backend.next_state()


def test_delegates_join_as_their_identity_over_the_websocket():
    asyncio.run(_delegates_over_websocket())


def test_cli_delegate_and_the_checks_before_any_connection(tmp_path):
    import socket

    from click.testing import CliRunner

    from psyche_client.cli.client import main
    contributor, node, other = key(30), key(31), key(32)
    contributor.save(tmp_path / "c.key")
    other.save(tmp_path / "o.key")
    run = CliRunner()
    out = run.invoke(main, ["delegate", "--identity-key", str(tmp_path / "c.key"), "--delegate",
                            node.public.hex(), "--run-id", "r1", "-o", str(tmp_path / "d.json")])
    assert out.exit_code == 0, out.output
    d = Delegation.load(tmp_path / "d.json")
    assert d.identity == contributor.public and d.problem("r1", node.public) is None
    bad = run.invoke(main, ["delegate", "--identity-key", str(tmp_path / "c.key"), "--delegate",
                            "abcd", "--run-id", "r1", "-o", str(tmp_path / "x.json")])
    assert bad.exit_code == 2 and "64 hex characters" in bad.output
    # a node key the delegation is not for is told so before it connects anywhere
    wrong = run.invoke(main, ["train", "--run-id", "r1", "--server-addr", "127.0.0.1:1", "-i",
                              str(tmp_path / "o.key"), "--delegation", str(tmp_path / "d.json")])
    assert wrong.exit_code == 2 and "the delegation is for node key" in wrong.output
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    down = run.invoke(main, ["leaderboard", "--server", f"127.0.0.1:{port}", "--run-id", "r1"])
    assert down.exit_code == 1 and "cannot reach coordinator" in down.output
