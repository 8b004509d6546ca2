"""Hostile websocket messages to the centralized server, in process (its handlers with a
stand-in socket): every one is answered with a named error (or accepted, when a mutation left
it valid), nothing escapes the handler, and the server still serves a valid request after it."""

import asyncio
import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from psyche_client.delegation import Delegation
from psyche_client.identity import Identity
from psyche_client.protocol import hello_message
from psyche_client.server.coordinator_server import Connection, CoordinatorServer
from psyche_coordinator_core import CoordinatorError, RunConfig, apply, new_run

from .mutate import fuzz, json_values, mutated, mutations

CONFIG = RunConfig(warmup_time=5, cooldown_time=2, max_round_train_time=6, round_witness_time=1,
                   epoch_time=15, total_steps=30, max_seq_len=16, min_clients=2,
                   init_min_clients=3, witness_nodes=0, global_batch_size_start=8,
                   global_batch_size_end=8, waiting_for_members_extra_time=1)
SERVER_CODES = {"Malformed", "BadHello", "WrongRunId", "BadDelegation", "NotADelegate",
                "NotAllowed", "UnknownQuery"}
CODES = SERVER_CODES | set(CoordinatorError.CODES)
ME = Identity(hashlib.sha256(b"fuzz-server").digest())
OTHER = Identity(hashlib.sha256(b"fuzz-server-other").digest())
K = ME.public.hex()
VALID = [  # what clients send, valid
    {"type": "op", "id": 1, "op": "join", "args": {"signer": K, "p2p_identity": K}},
    {"type": "op", "id": 2, "op": "join", "args": {"signer": K, "p2p_identity": K,
                                                   "identity": OTHER.public.hex()}},
    {"type": "op", "id": 3, "op": "withdraw", "args": {"signer": K}},
    {"type": "op", "id": 4, "op": "tick", "args": {}},
    {"type": "op", "id": 5, "op": "health_check", "args": {"signer": K, "index": 0,
                                                           "targets": [1]}},
    {"type": "op", "id": 6, "op": "checkpoint", "args": {"signer": K, "index": 0, "repo": "r",
                                                         "step": 1, "param_hash": "00" * 32}},
    {"type": "op", "id": 7, "op": "settle", "args": {"index": 0}},
    {"type": "query", "id": 8, "query": "leaderboard"},
]


class FakeWs:
    def __init__(self, incoming=()):
        self.sent, self.incoming, self.closed = [], list(incoming), None

    async def send(self, payload):
        self.sent.append(payload)

    async def recv(self):
        item = self.incoming.pop(0)
        return item(self) if callable(item) else item

    async def close(self, code=1000, reason=""):
        self.closed = (code, reason)

    def replies(self):
        return [json.loads(m) for m in self.sent if isinstance(m, str)]


def server():
    return CoordinatorServer(apply(new_run("fuzz", CONFIG, 5), 1000, "resume"),
                             withdraw_on_disconnect=False, clock=lambda: 1000.5)


def check_reply(reply):
    assert reply["type"] in ("ok", "error", "result"), reply
    if reply["type"] == "error":
        assert reply["code"] in CODES, reply
        assert isinstance(reply["message"], str)


def still_serves(srv, conn):
    """A valid query after the hostile message gets its answer."""
    asyncio.run(srv._on_message(conn, json.dumps({"type": "query", "id": 99,
                                                  "query": "leaderboard"})))
    last = conn.ws.replies()[-1]
    assert last["type"] == "result" and last["id"] == 99


def test_regression_a_deeply_nested_message_is_malformed_and_the_connection_serves_on():
    # the fuzzing's first find: json.loads raised RecursionError out of _on_message, which
    # ended the connection's handler (the socket closed with 1011) instead of answering
    srv = server()
    conn = Connection(FakeWs(), ME.public, ME.public)
    asyncio.run(srv._on_message(conn, "[" * 100_000))
    assert conn.ws.replies()[-1]["code"] == "Malformed"
    still_serves(srv, conn)
    hello = FakeWs(["{" * 100_000])
    assert asyncio.run(srv._hello(hello)) is None
    assert hello.replies()[-1]["code"] == "Malformed" and hello.closed[0] == 4002


@fuzz
@given(st.one_of(
    st.sampled_from([json.dumps(m) for m in VALID]).flatmap(
        lambda t: mutated(t.encode()).map(lambda b: b.decode("utf-8", "replace"))),
    st.sampled_from([json.dumps(m).encode() for m in VALID]).flatmap(mutated),  # binary frames
    st.builds(lambda m, k, v: json.dumps({**m, k: v}), st.sampled_from(VALID),
              st.sampled_from(["type", "id", "op", "args", "query"]), json_values()),
    st.builds(lambda m, k, v: json.dumps({**m, "args": {**m.get("args", {}), k: v}}),
              st.sampled_from(VALID[:7]), st.sampled_from(["signer", "index", "targets",
                                                           "repo", "identity", "step"]),
              json_values()),
    json_values().map(json.dumps),
))
def test_hostile_messages_get_named_errors_and_the_server_serves_on(raw):
    srv = server()
    conn = Connection(FakeWs(), ME.public, ME.public)
    asyncio.run(srv._on_message(conn, raw))  # raises nothing
    replies = conn.ws.replies()
    assert len(replies) == 1
    check_reply(replies[0])
    still_serves(srv, conn)


def valid_hello(ws, observer=False, delegation=None):
    nonce = bytes.fromhex(json.loads(ws.sent[0])["nonce"])
    if observer:
        return {"type": "hello", "run_id": "fuzz", "observer": True}
    msg = {"type": "hello", "run_id": "fuzz", "signer": K, "p2p_identity": K,
           "p2p_addr": "ws://127.0.0.1:1",
           "signature": ME.sign(hello_message(nonce, "fuzz")).hex()}
    if delegation:
        msg["delegation"] = Delegation.sign(OTHER, "fuzz", ME.public).to_json()
    return msg


@fuzz
@given(st.booleans(), st.booleans(), mutations(),
       st.one_of(st.none(), st.tuples(st.sampled_from(["run_id", "signer", "p2p_identity",
                                                         "p2p_addr", "signature", "observer",
                                                         "delegation", "type"]),
                                       json_values())))
def test_hostile_hellos_are_refused_by_name_and_the_next_hello_is_served(
        observer, delegation, mutate, replace):
    srv = server()

    def hostile(ws):
        msg = valid_hello(ws, observer, delegation)
        if replace is not None:
            msg[replace[0]] = replace[1]
            return json.dumps(msg)
        return mutate(json.dumps(msg).encode()).decode("utf-8", "replace")

    ws = FakeWs([hostile])
    conn = asyncio.run(srv._hello(ws))
    if conn is None:  # refused: by name, and the socket closed
        reply = ws.replies()[-1]
        assert reply["type"] == "error" and reply["code"] in SERVER_CODES, reply
        assert ws.closed is not None
    else:
        assert conn.signer in (None, ME.public)
    good = FakeWs([lambda w: json.dumps(valid_hello(w))])
    conn = asyncio.run(srv._hello(good))
    assert conn is not None and conn.signer == ME.public
