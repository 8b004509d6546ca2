"""Contributor points on the local chain, real processes: 3 clients (simulated training), two
of them delegates of one contributor identity (`set-delegates` first, then `train --identity`),
run to the end of a multi-epoch run (each new epoch waits for the slots' settlement). Every
state of the coordinator account is recorded over PubSub; the points each round earned are
derived from those states with the core's functions (presence: the healthy slots of the round
that ends; compute: the batches of the round before it, `assign_batches`, whose trainers a
witness quorum vouched for, `trainer_score` and `witness_quorum`). After `settle --all` the
`leaderboard --json` holds exactly that: the two delegates' points summed under one identity.
Then psyche-localnet is SIGKILLed and restarted from its --ledger: the leaderboard is the same."""

import asyncio
import json
import signal
import threading
import time
from collections import defaultdict

import pytest
import tomli_w
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solana.rpc.websocket_api import connect
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.rpc.responses import AccountNotification

from psyche_client.backends.solana import WS_MAX_MESSAGE
from psyche_client.chain.keys import load_keypair
from psyche_client.chain.program import Coordinator
from psyche_coordinator_core import RunState
from tests.chain.localnet import start_localnet
from tests.chain.test_chain_e2e import CLI, cli, keypair
from tests.integration.harness import FAST_CONFIG, Proc, stop_keeping_logs
from tests.integration.points_rule import round_credits

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
RUN_ID = "points-chain"
RATES = dict(presence_points=2, tokens_per_compute_point=1000)  # 384 tokens a round


class AccountRecorder:
    """Every version of one account, as PubSub notifies it (one per transaction that wrote
    it), from a background thread."""

    def __init__(self, ws_url: str, account: Pubkey):
        self.raw, self.error, self.account = [], None, account
        self._stop, self._ready = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(ws_url, account)),
                                        daemon=True)
        self._thread.start()
        assert self._ready.wait(30), f"could not subscribe at {ws_url}: {self.error!r}"

    async def _run(self, ws_url, account):
        try:
            async with connect(ws_url, max_size=WS_MAX_MESSAGE) as ws:
                await ws.account_subscribe(account, commitment=Confirmed, encoding="base64")
                await ws.recv()  # the subscription id
                self._ready.set()
                while not self._stop.is_set():
                    try:
                        batch = await asyncio.wait_for(ws.recv(), 0.5)
                    except asyncio.TimeoutError:
                        continue
                    for msg in batch:
                        if isinstance(msg, AccountNotification) and msg.result.value:
                            self.raw.append(bytes(msg.result.value.data))
        except Exception as e:  # reported by stop()
            self.error = e
            self._ready.set()

    def caught_up(self, rpc_url: str, timeout: float = 20.0) -> None:
        """Waits until the last version recorded is the account as the chain holds it now."""
        async def current():
            async with AsyncClient(rpc_url) as c:
                return bytes((await c.get_account_info(self.account)).value.data)
        data, end = asyncio.run(current()), time.monotonic() + timeout
        while not (self.raw and self.raw[-1] == data):
            assert time.monotonic() < end, "PubSub did not notify the account's last version"
            time.sleep(0.1)

    def states(self) -> list:
        dec = Coordinator("http://127.0.0.1:9", Keypair())
        return [dec.decode_state(d) for d in list(self.raw)]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.error is None, f"the PubSub recorder failed: {self.error!r}"


def derive_points(states):
    """{identity: [rounds present, sequences vouched for]} over the recorded states; checks
    each round's end against the counters the program wrote into the slots."""
    totals, ends = defaultdict(lambda: [0, 0]), 0
    for prev, nxt in zip(states, states[1:]):
        if not (prev.run_state == RunState.RoundWitness and nxt.epoch == prev.epoch
                and nxt.step == prev.step + 1):
            continue
        ends += 1
        credits = round_credits(prev, prev.current_round, prev.round_back(1))
        for i, (presence, sequences) in credits.items():
            before, after = prev.clients[i], nxt.clients[i]
            # (a settle_points ticks after settling: its slot starts again from zero)
            assert (after.presence, after.sequences) in (
                (before.presence + presence, before.sequences + sequences),
                (presence, sequences)), f"round {prev.step} (epoch {prev.epoch}), slot {i}"
            totals[before.identity][0] += presence
            totals[before.identity][1] += sequences
    return totals, ends


def leaderboard(net, run_id=RUN_ID):
    return json.loads(cli(net, "leaderboard", "--run-id", run_id, "--json").stdout)["leaderboard"]


def assert_board(board, derived):
    """The leaderboard holds the derived counts, and the points the run's rates give them."""
    by_identity = {bytes.fromhex(r["identity"]): r for r in board}
    assert set(by_identity) == set(derived), board
    for ident, (rounds, sequences) in derived.items():
        r = by_identity[ident]
        tokens = sequences * FAST_CONFIG["max_seq_len"]
        assert (r["presence_rounds"], r["sequences"], r["tokens"]) == (
            rounds, sequences, tokens), (r, rounds, sequences)
        assert r["presence_points"] == rounds * RATES["presence_points"]
        assert r["compute_points"] == tokens // RATES["tokens_per_compute_point"]
        assert r["total"] == r["presence_points"] + r["compute_points"]
    return by_identity


@pytest.mark.heavy
def test_delegates_points_add_up_under_one_identity_and_survive_a_restart(tmp_path, iroh_relay):
    state = tmp_path / "state.toml"
    # epoch 8 s, 16 steps: 2 epochs or more, each after the previous one's settlement
    state.write_text(tomli_w.dumps({"run_id": RUN_ID, "run_seed": 13, "config": {
        **FAST_CONFIG, "total_steps": 16, **RATES}}))
    ledger, procs = tmp_path / "ledger", {}
    try:
        with start_localnet("--ledger", str(ledger)) as net:
            owner = keypair(tmp_path, "owner", net, sol=100)
            cli(net, "create-run", "--state", str(state), keypair=owner)
            account = json.loads(cli(net, "show", "--run-id", RUN_ID, "--json").stdout)[
                "coordinator_account"]
            contributor = keypair(tmp_path, "contributor", net, sol=1)
            identity = load_keypair(contributor).pubkey()
            keys = [keypair(tmp_path, f"client-{n}", net, sol=10) for n in range(3)]
            signers = [load_keypair(k).pubkey() for k in keys]
            # the identity pays for its own contributor account (no --keypair)
            out = cli(net, "set-delegates", "--run-id", RUN_ID, "--identity-keypair",
                      str(contributor), str(signers[1]), str(signers[2])).stdout
            assert f"delegates {signers[1]}, {signers[2]}" in out, out

            recorder = AccountRecorder(net.ws_url, Pubkey.from_string(account))
            for n, key in enumerate(keys):
                acting = ["--identity", str(identity)] if n else []
                procs[n] = Proc(f"client-{n}", [
                    *CLI, "train", "--rpc", net.rpc_url, "--ws", net.ws_url, "--keypair",
                    str(key), "--run-id", RUN_ID, "--iroh-relay", iroh_relay,
                    "--dummy-training-delay-secs", "0.3", *acting])
            for p in procs.values():
                p.wait_line(r"run finished", timeout=480)
                assert p.p.wait(timeout=60) == 0, p.output()
            recorder.caught_up(net.rpc_url)
            recorder.stop()
            # the crank: whatever slot the clients left unsettled when the run finished
            print(cli(net, "settle", "--run-id", RUN_ID, "--all", keypair=owner).stdout)
            board = leaderboard(net)
            print(cli(net, "leaderboard", "--run-id", RUN_ID).stdout)
            net.process.send_signal(signal.SIGKILL)
            net.process.wait(10)

        with start_localnet("--ledger", str(ledger)) as net:
            assert leaderboard(net) == board  # nothing settled was lost with the process
            c = Coordinator(net.rpc_url, load_keypair(owner), Pubkey.from_string(net.program_id))

            async def read():
                try:
                    inst = c.instance_key(RUN_ID)
                    return (await c.contributors(inst),
                            await c.fetch_state((await c.fetch_instance(RUN_ID))
                                                .coordinator_account))
                finally:
                    await c.close()
            accounts, final = asyncio.run(read())
    finally:
        stop_keeping_logs(procs, tmp_path)

    states = recorder.states()
    assert final.run_state == RunState.Finished and not final.unsettled_count()
    assert max(s.epoch for s in states) >= 1, "the run never reached a second epoch"
    # the delegates' slots carry the identity they act for
    slots = {c.signer: c.identity for s in states for c in s.clients}
    assert slots[bytes(signers[0])] == bytes(signers[0])
    assert slots[bytes(signers[1])] == slots[bytes(signers[2])] == bytes(identity)
    # a new epoch began only once every slot of the last one was settled (settle_points ticks
    # after settling: the last slot's settlement may start it in the same instruction)
    starts = 0
    for prev, nxt in zip(states, states[1:]):
        if prev.run_state == RunState.WaitingForMembers and nxt.run_state == RunState.Warmup:
            starts += 1
            assert prev.unsettled_count() <= 1, f"epoch {nxt.epoch} began with unsettled slots"
    assert starts >= 2, f"{starts} epoch starts recorded"

    derived, ends = derive_points(states)
    assert ends >= 16, f"only {ends} round ends recorded"
    assert set(derived) == {bytes(signers[0]), bytes(identity)}
    by_identity = assert_board(board, derived)
    assert all(sequences > 0 for _, sequences in derived.values()), derived
    # two node keys earned the identity's points: more than the single node's
    assert by_identity[bytes(identity)]["presence_rounds"] > \
        by_identity[bytes(signers[0])]["presence_rounds"]
    # the contributor accounts themselves (getProgramAccounts) after the restart
    listed = {bytes(a.identity): a for a in accounts}
    assert set(listed) == set(derived)
    assert listed[bytes(identity)].delegates == (signers[1], signers[2])
    for ident, a in listed.items():
        assert a.points.presence_rounds == derived[ident][0]
        assert a.points.sequences == derived[ident][1]


@pytest.mark.heavy
def test_clients_killed_mid_epoch_their_points_are_live_and_the_crank_settles_them(
        localnet, tmp_path, iroh_relay):
    """Every client SIGKILLed during the second epoch: nobody settles their slots. The
    leaderboard shows the points the slots hold (`points.with_unsettled`); `settle --all`, by
    a stranger, moves them into the contributor accounts (its tick may end the round: then
    again), and the leaderboard stays what the recorded states give."""
    run_id = "points-crank"
    state = tmp_path / "state.toml"
    state.write_text(tomli_w.dumps({"run_id": run_id, "run_seed": 17, "config": {
        **FAST_CONFIG, **RATES}}))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), keypair=owner)
    account = json.loads(cli(localnet, "show", "--run-id", run_id, "--json").stdout)[
        "coordinator_account"]
    recorder = AccountRecorder(localnet.ws_url, Pubkey.from_string(account))
    procs = {}
    try:
        for n in range(3):
            key = keypair(tmp_path, f"client-{n}", localnet, sol=10)
            procs[n] = Proc(f"client-{n}", [
                *CLI, "train", "--rpc", localnet.rpc_url, "--ws", localnet.ws_url, "--keypair",
                str(key), "--run-id", run_id, "--iroh-relay", iroh_relay,
                "--dummy-training-delay-secs", "0.3"])
        first = int(procs[0].wait_line(r"RoundTrain epoch 1 step (\d+)", timeout=300)[1])
        procs[0].wait_line(rf"RoundTrain epoch 1 step {first + 2}\b", timeout=60)  # 2 ended
        for p in procs.values():
            p.kill()
        recorder.caught_up(localnet.rpc_url)
        live, states = leaderboard(localnet, run_id), recorder.states()
        assert states[-1].unsettled_count() == 3, "the killed clients' slots hold points"
        assert_board(live, derive_points(states)[0])
        print(cli(localnet, "leaderboard", "--run-id", run_id).stdout)

        stranger = keypair(tmp_path, "stranger", localnet, sol=1)
        for _ in range(4):
            out = cli(localnet, "settle", "--run-id", run_id, "--all", keypair=stranger).stdout
            print(out)
            if "no slot holds unsettled points" in out:
                break
        recorder.caught_up(localnet.rpc_url)
        recorder.stop()
        states = recorder.states()
        assert not states[-1].unsettled_count()
        derived, _ = derive_points(states)
        assert_board(leaderboard(localnet, run_id), derived)
        refused = cli(localnet, "settle", "--run-id", run_id, "--index", "0",
                      keypair=stranger, check=False)
        assert refused.returncode == 1 and "NothingToSettle" in refused.stderr, refused.stderr
        refused = cli(localnet, "settle", "--run-id", run_id, "--index", "9",
                      keypair=stranger, check=False)
        assert refused.returncode == 1 and "InvalidClientIndex" in refused.stderr, refused.stderr
    finally:
        stop_keeping_logs(procs, tmp_path)


def test_a_client_acting_for_an_identity_that_did_not_delegate_to_it_exits_2(localnet, tmp_path,
                                                                              iroh_relay):
    run_id = "points-not-delegate"
    state = tmp_path / "state.toml"
    state.write_text(tomli_w.dumps({"run_id": run_id, "run_seed": 19, "config": FAST_CONFIG}))
    owner = keypair(tmp_path, "owner", localnet, sol=100)
    cli(localnet, "create-run", "--state", str(state), keypair=owner)
    contributor = keypair(tmp_path, "contributor", localnet, sol=1)
    node, other = (keypair(tmp_path, name, localnet, sol=1) for name in ("node", "other"))
    # the identity lists another node key, not this one
    cli(localnet, "set-delegates", "--run-id", run_id, "--identity-keypair", str(contributor),
        str(load_keypair(other).pubkey()))
    p = Proc("node", [*CLI, "train", "--rpc", localnet.rpc_url, "--ws", localnet.ws_url,
                      "--keypair", str(node), "--run-id", run_id,
                      "--iroh-relay", iroh_relay,
                      "--identity", str(load_keypair(contributor).pubkey())])
    try:
        assert p.p.wait(timeout=120) == 2, p.output()
    finally:
        p.stop()
    assert "NotADelegate" in p.output() and "set-delegates" in p.output(), p.output()
    state = json.loads(cli(localnet, "show", "--run-id", run_id, "--json").stdout)["state"]
    assert state["pending"] == []
