"""`evidence` is reachable through both backends (the client code that sends it is not written
yet): over the centralized server's websocket it reaches the core's operation and comes back
with the core's error names; the Solana backend builds the program's `evidence` instruction."""

import asyncio
import hashlib
import json
import struct

import pytest
from solders.keypair import Keypair

from psyche_client.backends.centralized import CentralizedBackend
from psyche_client.backends.solana import SolanaBackend
from psyche_client.chain.idl import IDL_PATH
from psyche_client.identity import Identity
from psyche_client.server.coordinator_server import CLIENT_OPS, CoordinatorServer
from psyche_coordinator_core import (
    ClientState,
    CoordinatorError,
    RoundCommittee,
    RunConfig,
    RunState,
    apply,
    assign_batches,
    new_run,
    verification_sample,
)

T0 = 1000
CONFIG = RunConfig(warmup_time=5, cooldown_time=2, max_round_train_time=60,
                   round_witness_time=30, epoch_time=600, min_clients=2, init_min_clients=8,
                   global_batch_size_start=16, global_batch_size_end=16,
                   waiting_for_members_extra_time=1, verification_percent=25, evidence_quorum=2)


def key(n) -> Identity:
    return Identity(hashlib.sha256(b"evidence-test-%d" % n).digest())


KEYS = [key(n) for n in range(8)]


def round_train_state():
    """8 clients in their first round (RoundTrain at T0 + 3): 2 verifiers, 6 trainers."""
    s = apply(new_run("ev", CONFIG, 7), T0, "resume")
    for k in KEYS:
        s = apply(s, T0, "join", signer=k.public, p2p_identity=k.public)
    s = apply(s, T0 + 2, "tick")
    for i, k in enumerate(KEYS):
        s = apply(s, T0 + 3, "warmup_witness", signer=k.public, index=i)
    assert s.run_state == RunState.RoundTrain
    return s


async def _serve(server):
    started = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(server.run("127.0.0.1", 0, started=started.set_result))
    return task, await asyncio.wait_for(started, 30)


async def _evidence_over_websocket():
    state = round_train_state()
    rnd = state.current_round
    verifiers = RoundCommittee(rnd, CONFIG.witness_nodes, 25).verifier_indices()
    trainers = sorted(assign_batches(CONFIG, rnd))
    assert len(verifiers) == 2 and len(trainers) == 6
    server = CoordinatorServer(state, withdraw_on_disconnect=False, clock=lambda: T0 + 4)
    task, port = await _serve(server)
    url = f"ws://127.0.0.1:{port}"
    backends = []
    try:
        for v in verifiers:
            b = CentralizedBackend(url, "ev", KEYS[v], KEYS[v].public, None)
            await b.connect()
            backends.append(b)
        samples = [verification_sample(CONFIG, rnd, v) for v in verifiers]
        target, step = samples[0][0], state.step
        args = lambda v, t=target: {"signer": KEYS[v].public, "index": v,  # noqa: E731
                                    "step": step, "target": t}
        await backends[0].send("evidence", args(verifiers[0]))
        c = server.state.clients[target]
        assert c.accusers == 1 << verifiers[0] and c.state == ClientState.Healthy
        assert server.state.current_round.accused == 1 << target
        with pytest.raises(CoordinatorError) as e:
            await backends[0].send("evidence", args(verifiers[0]))
        assert e.value.code == "AlreadyAccused"
        with pytest.raises(CoordinatorError) as e:  # the core's own checks, by name
            await backends[0].send("evidence", {**args(verifiers[0]), "step": step + 1})
        assert e.value.code == "InvalidEvidence"
        with pytest.raises(CoordinatorError) as e:  # outside this verifier's sample
            await backends[1].send("evidence", args(verifiers[1]))
        assert e.value.code == "InvalidEvidence" and "sample" in str(e.value)
        await backends[1].send("evidence", args(verifiers[1], samples[1][0]))
        assert server.state.current_round.accused == 1 << target | 1 << samples[1][0]
        # a trainer is no verifier; and only the connection's own signer may send
        t = CentralizedBackend(url, "ev", KEYS[trainers[1]], KEYS[trainers[1]].public, None)
        await t.connect()
        backends.append(t)
        with pytest.raises(CoordinatorError) as e:
            await t.send("evidence", {"signer": KEYS[trainers[1]].public,
                                      "index": trainers[1], "step": step, "target": trainers[2]})
        assert e.value.code == "NotAVerifier"
        with pytest.raises(CoordinatorError) as e:
            await t.send("evidence", args(verifiers[0]))
        assert e.value.code == "NotAClient"
    finally:
        for b in backends:
            await b.close()
        task.cancel()


def test_evidence_reaches_the_core_over_the_websocket():
    assert "evidence" in CLIENT_OPS
    asyncio.run(_evidence_over_websocket())


def test_solana_backend_builds_the_evidence_instruction():
    me = Keypair()
    b = SolanaBackend("http://127.0.0.1:9", "ws://127.0.0.1:9", "ev", me)
    b.account = Keypair().pubkey()
    ix = b._instruction("evidence", {"signer": bytes(me.pubkey()), "index": 5, "step": 17,
                                     "target": 300})
    disc = next(i["discriminator"] for i in json.loads(IDL_PATH.read_text())["instructions"]
                if i["name"] == "evidence")
    assert ix.data == bytes(disc) + struct.pack("<IIH", 5, 17, 300)
    hc = b._instruction("health_check", {"index": 5, "targets": [1]})
    assert [(m.pubkey, m.is_signer, m.is_writable) for m in ix.accounts] == \
        [(m.pubkey, m.is_signer, m.is_writable) for m in hc.accounts]
    assert ix.accounts[0].pubkey == me.pubkey() and ix.accounts[0].is_signer


def test_an_evicted_client_does_not_ask_to_join_again_this_epoch():
    from dataclasses import replace

    from psyche_client.client.state_machine import ClientStateMachine

    def joins(actions):
        return [a for a in actions if getattr(a, "op", None) == "join"]

    state = round_train_state()
    me = KEYS[3]
    sm = ClientStateMachine(me.public, me.public)
    assert joins(sm.on_state(state, T0 + 4))  # a client of this epoch joins for the next
    sm.op_finished("join", "RunFull", {})
    evicted = state.clone()
    evicted.clients[3] = replace(evicted.clients[3], state=ClientState.Evicted)
    assert not joins(sm.on_state(evicted, T0 + 6) + sm.on_timer(T0 + 7))
    # a Dropped client asks again at once
    dropped = state.clone()
    dropped.clients[3] = replace(dropped.clients[3], state=ClientState.Dropped)
    assert joins(sm.on_state(dropped, T0 + 8) + sm.on_timer(T0 + 9))
