"""A server restarted from its saved state withdraws the members that do not connect again
within the grace period, and keeps those that do (in process: no sockets)."""

import asyncio
import hashlib
from dataclasses import replace

from psyche_client.server.coordinator_server import Connection, CoordinatorServer
from psyche_coordinator_core import ClientState, RunState, apply, new_run

from .test_server_ticks import CONFIG


def key(name: bytes) -> bytes:
    return hashlib.sha256(name).digest()


class Socket:
    """Enough of a websocket for the server's broadcasts."""

    def __init__(self):
        self.sent = []

    async def send(self, payload):
        self.sent.append(payload)


def restored_state():
    """Warmup of an epoch with clients a and b; c has joined for the next one."""
    config = replace(CONFIG, min_clients=2, init_min_clients=2)
    state = apply(new_run("grace", config, 7), 1000, "resume")
    for name in (b"a", b"b"):
        state = apply(state, 1000, "join", signer=key(name), p2p_identity=key(name))
    state = apply(state, 1002, "tick")
    assert state.run_state == RunState.Warmup
    return apply(state, 1002, "join", signer=key(b"c"), p2p_identity=key(b"c"))


def run_grace(server, connected):
    async def go():
        for signer in connected:
            ws = Socket()
            server.connections[ws] = Connection(ws, signer, signer)
        await server._withdraw_absent()
    asyncio.run(go())


def test_members_not_connected_again_are_withdrawn():
    server = CoordinatorServer(restored_state(), clock=lambda: 1003, reconnect_grace=0.01)
    run_grace(server, [key(b"a")])
    st = server.state
    states = {c.signer: c.state for c in st.clients}
    assert states == {key(b"a"): ClientState.Healthy, key(b"b"): ClientState.Withdrawn}
    assert st.pending == []  # c joined before the restart and is gone
    # a is alone: below min_clients the epoch gives way to WaitingForMembers
    assert st.run_state == RunState.WaitingForMembers


def test_members_all_back_change_nothing():
    state = restored_state()
    server = CoordinatorServer(state, clock=lambda: 1003, reconnect_grace=0.01)
    run_grace(server, [key(b"a"), key(b"b"), key(b"c")])
    assert server.state is state
