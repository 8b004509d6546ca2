"""End-to-end tests of the centralized backend: real server and client processes on loopback."""

import asyncio
import json

import pytest
import websockets
from websockets.asyncio.client import connect

from psyche_client.server.persistence import StateStore
from psyche_coordinator_core import ClientState, RunState, from_bytes

from .harness import Cluster, Observer, write_state

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    clusters = []

    def make(server_args=(), **config):
        c = Cluster(tmp_path, write_state(tmp_path, **config), server_args)
        clusters.append(c)
        return c

    yield make
    for c in clusters:
        c.stop()
        print(c.dump())  # shown by pytest only when the test fails


def start(cluster, n_clients=3, server_args=(), **config):
    c = cluster(server_args, **config)
    c.start_server()
    for n in range(1, n_clients + 1):
        c.start_client(n)
    return c, Observer(c.port, c.run_id)


def in_round(st, min_height=0):
    return st.run_state == RunState.RoundTrain and st.current_round.height >= min_height


def test_three_clients_finish_two_epochs(cluster):
    c, obs = start(cluster, total_steps=12)
    end = obs.wait(lambda s: s.run_state == RunState.Finished, 300, "Finished")
    assert end.epoch >= 2 and end.step > 12
    epochs = {s.epoch for s in obs.history if s.run_state == RunState.RoundTrain}
    assert len(epochs) >= 2
    # every round of every epoch had all three clients and reached a witness quorum
    assert all(s.healthy_count() == 3 for s in obs.history if s.run_state == RunState.RoundTrain)
    for n in (1, 2, 3):  # clients exit by themselves once the run has finished
        assert c.clients[n].p.wait(60) == 0, c.clients[n].output()


def _kill_in_train_and_watch(c, obs, victim=3):
    st = obs.wait(lambda s: in_round(s, 1), 180, "a training round")
    signer = c.signer(victim)
    c.clients[victim].kill()
    killed_at = st.step
    idx = st.client_index(signer)
    gone = obs.wait(lambda s: s.clients and s.client_index(signer) is not None
                    and s.clients[s.client_index(signer)].state != ClientState.Healthy,
                    180, "the killed client to leave")
    later = obs.wait(lambda s: in_round(s) and s.step >= killed_at + 4, 180, "4 more rounds")
    return idx, gone, later


def test_client_killed_in_training_is_withdrawn_and_run_goes_on(cluster):
    # three witnesses with a quorum of two: losing any one client, witness or not, is survivable
    c, obs = start(cluster, witness_nodes=0, epoch_time=60)
    idx, gone, later = _kill_in_train_and_watch(c, obs)
    assert gone.clients[idx].state == ClientState.Withdrawn
    assert later.current_round.participants & (1 << idx) == 0 or later.epoch > gone.epoch
    assert later.healthy_count() == 2


def test_client_killed_in_training_is_dropped_by_health_check(cluster):
    # without withdraw-on-disconnect the server never hears of the kill: the witnesses
    # see no result from the victim and their health checks remove it
    c, obs = start(cluster, server_args=("--withdraw-on-disconnect", "false"),
                   max_round_train_time=3, epoch_time=60, witness_nodes=0)
    idx, gone, later = _kill_in_train_and_watch(c, obs)
    assert gone.clients[idx].state == ClientState.Dropped, c.dump()
    assert later.epoch == gone.epoch and later.healthy_count() == 2
    assert any("health check" in ln for p in c.clients.values() for ln in p.lines)


def test_falling_below_min_clients_returns_to_waiting(cluster):
    c, obs = start(cluster, min_clients=3, epoch_time=60)
    st = obs.wait(lambda s: in_round(s, 1), 180, "a training round")
    c.clients[3].kill()
    back = obs.wait(lambda s: s.run_state == RunState.WaitingForMembers and s.epoch > st.epoch,
                    180, "WaitingForMembers")
    assert back.epoch == st.epoch + 1
    # the run waits for a third client; a fresh one lets it start again
    c.start_client(4)
    again = obs.wait(lambda s: s.run_state == RunState.RoundTrain and s.epoch == back.epoch,
                     180, "the next epoch")
    assert again.healthy_count() == 3


def test_server_killed_and_restarted_resumes(cluster, tmp_path):
    save = tmp_path / "saved"
    c, obs = start(cluster, server_args=("--save-state-dir", str(save)), epoch_time=60)
    before = obs.wait(lambda s: in_round(s, 2), 180, "round 2")
    port = c.port
    c.server.kill()
    saved = StateStore(save).load()  # the state's bytes (then the points ledger, if any)
    # the file holds the last state the server accepted: at least what the observer saw
    assert (saved.epoch, saved.step) >= (before.epoch, before.step)
    assert [x.signer for x in saved.clients] == [x.signer for x in before.clients]
    c.start_server(port)
    resumed = obs.wait(lambda s: True, 120, "a state after restart")
    assert (resumed.epoch, resumed.step) >= (saved.epoch, saved.step)
    assert resumed.step <= saved.step + 1  # it resumed, not restarted
    assert [x.signer for x in resumed.clients] == [x.signer for x in saved.clients]
    later = obs.wait(lambda s: in_round(s) and s.step >= saved.step + 3, 180,
                     "rounds after restart")
    assert later.healthy_count() == 3 and later.epoch == saved.epoch


async def _raw(port):
    ws = await connect(f"ws://127.0.0.1:{port}", max_size=None)
    challenge = json.loads(await ws.recv())
    assert challenge["type"] == "challenge"
    return ws


async def _bad_clients(port, run_id, identity):
    from psyche_client.protocol import hello_message

    # wrong run id: a named error, then the connection closes with 4001
    ws = await _raw(port)
    await ws.send(json.dumps({"type": "hello", "run_id": "other-run", "observer": True}))
    err = json.loads(await ws.recv())
    assert err["code"] == "WrongRunId" and "other-run" in err["message"]
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await ws.recv()
    assert closed.value.rcvd.code == 4001

    # a real identity that then sends garbage: errors, but the connection stays up
    ws = await connect(f"ws://127.0.0.1:{port}", max_size=None)
    nonce = bytes.fromhex(json.loads(await ws.recv())["nonce"])
    await ws.send(json.dumps({"type": "hello", "run_id": run_id, "signer": identity.public.hex(),
                              "p2p_identity": identity.public.hex(), "p2p_addr": None,
                              "signature": identity.sign(hello_message(nonce, run_id)).hex()}))
    spec = json.loads(await ws.recv())  # the training spec comes first: none, simulated run
    assert spec == {"type": "spec", "spec": None}
    state = await ws.recv()
    assert isinstance(state, bytes) and from_bytes(state).run_id == run_id

    async def next_error():
        while True:
            m = await ws.recv()
            if isinstance(m, str) and json.loads(m)["type"] == "error":
                return json.loads(m)

    await ws.send("this is not json")
    assert (await next_error())["code"] == "Malformed"
    await ws.send(json.dumps({"type": "op", "id": 5, "op": "fly", "args": {}}))
    err = await next_error()
    assert err["code"] == "InvalidOperation" and err["id"] == 5
    await ws.send(json.dumps({"type": "op", "id": 6, "op": "witness", "args": {"signer": "zz"}}))
    assert (await next_error())["code"] == "InvalidOperation"
    await ws.send(json.dumps({"type": "op", "id": 7, "op": "pause", "args": {}}))
    assert (await next_error())["code"] == "InvalidOperation"

    # oversized: the server closes this connection with 1009 (message too big)
    await ws.send("x" * (2 << 20))
    with pytest.raises(websockets.ConnectionClosed) as closed:
        while True:
            await ws.recv()
    assert closed.value.rcvd.code == 1009


def test_bad_messages_get_clear_errors_and_others_keep_being_served(cluster, tmp_path):
    from psyche_client.identity import Identity

    c, obs = start(cluster, epoch_time=60)
    before = obs.wait(lambda s: in_round(s, 1), 180, "a training round")
    asyncio.run(_bad_clients(c.port, c.run_id, Identity.generate()))
    after = obs.wait(lambda s: in_round(s) and s.step >= before.step + 3, 180, "more rounds")
    assert after.healthy_count() == 3
    assert c.server.p.poll() is None
