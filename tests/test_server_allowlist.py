"""The centralized server's allow-list (psyche_client/server/allowlist.py): who may take part,
refusals named NotAllowed, permissionless without one. In process: the message handler with a
stand-in socket, and one real websocket on loopback."""

import asyncio
import hashlib
import json

import pytest

from psyche_client.backends.base import FatalBackendError
from psyche_client.backends.centralized import CentralizedBackend
from psyche_client.delegation import Delegation
from psyche_client.identity import Identity
from psyche_client.server.allowlist import (
    AllowList,
    AllowListError,
    _b58decode,
    parse_allow_file,
    parse_key,
)
from psyche_client.server.coordinator_server import Connection, CoordinatorServer
from psyche_coordinator_core import RunConfig, apply, new_run
from psyche_coordinator_core.ops_json import encode_args

CONFIG = RunConfig(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
                   epoch_time=15, total_steps=30, max_seq_len=16, min_clients=2,
                   init_min_clients=3, witness_nodes=0, global_batch_size_start=8,
                   global_batch_size_end=8, waiting_for_members_extra_time=1)


def key(n) -> Identity:
    return Identity(hashlib.sha256(b"allow-test-%d" % n).digest())


def b58(raw: bytes) -> str:
    n = int.from_bytes(raw, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"[r] + out
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + out


class FakeWs:
    def __init__(self):
        self.sent = []

    async def send(self, payload):
        self.sent.append(payload)

    def replies(self):
        return [json.loads(m) for m in self.sent if isinstance(m, str)]


def server(allow=None):
    return CoordinatorServer(apply(new_run("acl", CONFIG, 5), 1000, "resume"),
                             withdraw_on_disconnect=False, clock=lambda: 1000.5, allow=allow)


def op(conn, srv, name, args, op_id=1):
    msg = json.dumps({"type": "op", "id": op_id, "op": name, "args": encode_args(name, args)})
    asyncio.run(srv._on_message(conn, msg))
    return conn.ws.replies()[-1]


def join(conn, srv, identity=None):
    args = {"signer": conn.signer, "p2p_identity": conn.signer}
    if identity is not None:
        args["identity"] = identity
    return op(conn, srv, "join", args)


def test_keys_parse_as_hex_or_base58_and_files_name_the_bad_line(tmp_path):
    k = key(1).public
    assert parse_key(k.hex()) == k and parse_key(k.hex().upper()) == k
    assert parse_key(b58(k)) == k and parse_key("  " + b58(k) + "\n") == k
    assert _b58decode("11") == b"\0\0" and parse_key(b58(b"\0" + k[1:])) == b"\0" + k[1:]
    for bad in ("", "zz", k.hex()[:-2], k.hex() + "00", "0OIl" * 10, b58(k[:31]), "x" * 5000):
        with pytest.raises(AllowListError, match="not a public key"):
            parse_key(bad)
    text = f"# the run's contributors\n{k.hex()}  # alice\n\n{b58(key(2).public)}\n"
    assert parse_allow_file(text) == {k, key(2).public}
    with pytest.raises(AllowListError, match=r"f:3: 'nope' is not a public key"):
        parse_allow_file(f"{k.hex()}\n\nnope\n", "f")

    path = tmp_path / "allow.txt"
    path.write_text(k.hex() + "\n")
    allow = AllowList(path, [key(3).public.hex()])
    assert k in allow and key(3).public in allow and key(2).public not in allow
    path.write_text(key(2).public.hex() + "\n")
    assert allow.reload() == 2 and key(2).public in allow and k not in allow
    path.write_text("garbage\n")  # a bad file on reload: the previous list stays
    with pytest.raises(AllowListError, match="allow.txt:1"):
        allow.reload()
    assert key(2).public in allow and key(3).public in allow
    with pytest.raises(AllowListError, match="cannot read"):
        AllowList(tmp_path / "missing.txt")


def test_without_an_allow_list_anyone_joins():
    srv, stranger = server(), key(9).public
    conn = Connection(FakeWs(), stranger, stranger)
    assert join(conn, srv) == {"type": "ok", "id": 1}
    assert srv.state.pending[-1].signer == stranger


def test_the_allow_list_refuses_joins_and_every_op_of_strangers_with_not_allowed():
    alice, stranger = key(1).public, key(9).public
    srv = server(AllowList(keys=[alice]))
    ok = Connection(FakeWs(), alice, alice)
    assert join(ok, srv)["type"] == "ok"
    bad = Connection(FakeWs(), stranger, stranger)
    reply = join(bad, srv)
    assert reply["type"] == "error" and reply["code"] == "NotAllowed" and reply["id"] == 1
    assert "allow-list" in reply["message"]
    assert stranger not in [c.signer for c in srv.state.pending]
    for name, args in (("withdraw", {"signer": stranger}), ("tick", {}),
                       ("warmup_witness", {"signer": stranger, "index": 0})):
        assert op(bad, srv, name, args)["code"] == "NotAllowed"
    # malformed or not: a stranger hears NotAllowed, not how its op would have been decoded
    asyncio.run(srv._on_message(bad, json.dumps({"type": "op", "id": 7, "op": "join",
                                                 "args": {"nope": 1}})))
    assert bad.ws.replies()[-1]["code"] == "NotAllowed"
    # queries stay open to anyone connected (observers too)
    asyncio.run(srv._on_message(bad, json.dumps({"type": "query", "id": 8,
                                                 "query": "leaderboard"})))
    assert bad.ws.replies()[-1]["type"] == "result"


def test_a_delegate_of_an_allowed_identity_joins_as_it_but_not_as_itself():
    alice, node, other = key(1), key(2).public, key(3)
    srv = server(AllowList(keys=[alice.public]))
    conn = Connection(FakeWs(), node, node, delegation=Delegation.sign(alice, "acl", node))
    reply = join(conn, srv)  # as itself: its points would go to an identity not on the list
    assert reply["code"] == "NotAllowed" and node.hex()[:16] in reply["message"]
    assert join(conn, srv, alice.public)["type"] == "ok"
    assert srv.state.pending[-1].identity == alice.public
    # an allowed node key with a delegation of an identity not on the list: not as that identity
    srv2 = server(AllowList(keys=[node]))
    conn2 = Connection(FakeWs(), node, node, delegation=Delegation.sign(other, "acl", node))
    assert join(conn2, srv2, other.public)["code"] == "NotAllowed"
    assert join(conn2, srv2)["type"] == "ok"


def test_a_reloaded_list_applies_to_the_next_op(tmp_path):
    alice = key(1).public
    path = tmp_path / "allow.txt"
    path.write_text("# nobody yet\n")
    srv = server(AllowList(path))
    conn = Connection(FakeWs(), alice, alice)
    assert join(conn, srv)["code"] == "NotAllowed"
    path.write_text(alice.hex() + "\n")
    srv.allow.reload()
    assert join(conn, srv)["type"] == "ok"


async def _refused_over_websocket():
    alice, stranger = key(1), key(9)
    srv = server(AllowList(keys=[alice.public]))
    started = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(srv.run("127.0.0.1", 0, started=started.set_result))
    port = await asyncio.wait_for(started, 30)
    url = f"ws://127.0.0.1:{port}"
    try:
        good = CentralizedBackend(url, "acl", alice, alice.public, None)
        await good.connect()
        await good.send("join", {"signer": alice.public, "p2p_identity": alice.public})
        bad = CentralizedBackend(url, "acl", stranger, stranger.public, None)
        await bad.connect()
        with pytest.raises(FatalBackendError, match="NotAllowed: .*allow-list"):
            await bad.send("join", {"signer": stranger.public,
                                    "p2p_identity": stranger.public})
        assert [c.signer for c in srv.state.pending] == [alice.public]
        for b in (good, bad):
            await b.close()
    finally:
        task.cancel()


def test_a_stranger_is_refused_over_the_websocket_for_good():
    asyncio.run(_refused_over_websocket())


def test_the_daemon_stops_for_good_on_not_allowed():
    """As on RunFull: the daemon keeps the refusal and stops; run() raises it and the CLI
    prints it and exits (cli/common.py: FatalBackendError)."""
    from types import SimpleNamespace

    from psyche_client.client.daemon import ClientDaemon

    async def send(op, args):
        raise FatalBackendError("NotAllowed: 0123 is not on this run's allow-list")

    transport = SimpleNamespace(on_result=None, model_sharing=None)
    daemon = ClientDaemon(key(9), SimpleNamespace(send=send), transport, None)
    me = key(9).public
    asyncio.run(daemon._send("join", {"signer": me, "p2p_identity": me}))
    assert daemon._stop.is_set() and isinstance(daemon._refusal, FatalBackendError)
    assert "NotAllowed" in str(daemon._refusal)


def test_the_cli_refuses_a_bad_allow_file_before_anything_starts(tmp_path):
    from click.testing import CliRunner

    from psyche_client.cli.server import main

    bad = tmp_path / "allow.txt"
    bad.write_text(key(1).public.hex() + "\nnot-a-key\n")
    res = CliRunner().invoke(main, ["run", "--state", str(tmp_path / "state.toml"), "--tui",
                                    "false", "--allow", str(bad)])
    assert res.exit_code == 2 and "allow.txt:2: 'not-a-key' is not a public key" in res.output
    res = CliRunner().invoke(main, ["run", "--state", str(tmp_path / "state.toml"), "--tui",
                                    "false", "--allow-key", "zz"])
    assert res.exit_code == 2 and "'zz' is not a public key" in res.output
