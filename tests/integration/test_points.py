"""Contributor points on the centralized backend, real processes (simulated training): three
clients, two of them node keys acting for one contributor identity through delegations
(`psyche-centralized-client delegate`, `train --delegation`), the third for itself.

- epoch 0 ends, its slots are settled (epoch 1 starts only then) and the ledger is saved with
  the state; the server is SIGKILLed in epoch 1 and restarted from --save-state-dir: its file
  holds the settled ledger, the restarted server shows the same points, and the run goes on;
- once the run has finished, `leaderboard --json` lists two identities: the delegates' points
  summed under the contributor; presence rounds, sequences and points equal what the recorded
  states say (every round's end replayed with the core's own functions: present clients, batch
  assignment, witness quorum), and the points follow the run's rates."""

import json
import subprocess
import sys
from collections import Counter

import pytest

from psyche_client.identity import Identity
from psyche_client.server.persistence import StateStore
from psyche_coordinator_core import RunState

from .harness import Cluster, write_state
from .points_rule import round_credits
from .recorder import Recorder

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(900)]
CLI = [sys.executable, "-m", "psyche_client.cli.client"]
SETTLE_STATES = (RunState.Cooldown, RunState.WaitingForMembers, RunState.Paused,
                 RunState.Finished)
RATES = dict(presence_points=3, tokens_per_compute_point=100)


def cli(*args) -> str:
    out = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def leaderboard(port, run_id, *flags) -> str:
    return cli("leaderboard", "--server", f"ws://127.0.0.1:{port}", "--run-id", run_id, *flags)


def board(port, run_id, *flags) -> dict:
    return {r["identity"]: r for r in json.loads(leaderboard(port, run_id, "--json",
                                                             *flags))["leaderboard"]}


def expected_points(states) -> dict:
    """{identity hex: Counter(presence_rounds, sequences)} from every round end the recorded
    states show (the step moves on by one): the clients present at its end, and the batches of
    the round before whose trainers a witness quorum of this round vouched for."""
    out = {}
    for a, b in zip(states, states[1:]):
        if b.step == a.step:
            continue
        assert b.step == a.step + 1 and b.epoch == a.epoch, (a.step, b.step, a.epoch, b.epoch)
        if b.run_state == RunState.RoundTrain:  # the next round started: the ended one is back 1
            ended, trained = b.round_back(1), b.round_back(2)
        else:  # Cooldown: the ended round is still the current one
            ended, trained = b.current_round, b.round_back(1)
        assert ended.height == a.current_round.height
        for i, (presence, sequences) in round_credits(a, ended, trained).items():
            if not (presence or sequences):
                continue
            counts = out.setdefault(a.clients[i].identity.hex(), Counter())
            counts["presence_rounds"] += presence
            counts["sequences"] += sequences
    return out


def test_delegates_points_add_up_survive_a_server_kill_and_match_the_rounds(tmp_path):
    state = write_state(tmp_path, run_id="points", total_steps=24, epoch_time=8,
                        max_round_train_time=6, round_witness_time=2, **RATES)
    saved = tmp_path / "saved"
    c = Cluster(tmp_path, state, ("--save-state-dir", str(saved), "--reconnect-grace", "10"))
    contributor = Identity.generate()
    contributor.save(tmp_path / "contributor.key")
    rec = None
    try:
        c.start_server()
        for n in (1, 2, 3):
            Identity.generate().save(tmp_path / f"client-{n}.key")
        for n in (1, 2):  # the contributor delegates this run to two node keys
            cli("delegate", "--identity-key", str(tmp_path / "contributor.key"), "--delegate",
                c.signer(n).hex(), "--run-id", "points", "-o", str(tmp_path / f"d{n}.json"))
        rec = Recorder(c.port, "points")
        for n in (1, 2, 3):
            extra = ("--delegation", str(tmp_path / f"d{n}.json")) if n != 3 else ()
            c.start_client(n, extra=extra)

        # epoch 1 starts only once epoch 0's slots are settled into the ledger
        k, st = rec.wait(lambda s: s.epoch == 1 and s.run_state == RunState.RoundTrain
                         and s.current_round.height >= 1, 300, "a round of epoch 1")
        assert {x.identity for x in st.clients} == {contributor.public, c.signer(3)}
        before = board(c.port, "points", "--settled")
        assert set(before) == {contributor.public.hex(), c.signer(3).hex()}
        assert all(r["presence_rounds"] > 0 for r in before.values())

        # SIGKILL: the file holds what was settled; the restarted server shows it
        c.server.kill()
        killed_at = len(rec.states)
        on_disk = StateStore(saved).load_ledger()
        assert {i.hex(): p.presence_rounds for i, p in on_disk.items()} == {
            i: r["presence_rounds"] for i, r in before.items()}
        c.start_server(c.port)
        after = board(c.port, "points", "--settled")
        settled_since = any(s.run_state in SETTLE_STATES for s in rec.states[killed_at:])
        if not settled_since:  # nothing could be settled since: exactly the same points
            assert after == before
        for i, r in before.items():  # else more, never less
            assert all(after[i][f] >= v for f, v in r.items() if f != "rank")

        # the run goes on to the end
        rec.wait(lambda s: s.run_state == RunState.Finished, 400, "Finished")
        table = leaderboard(c.port, "points")
        final = board(c.port, "points")
        print("== leaderboard after the run\n" + table + "\n" + json.dumps(final, indent=1))
        assert final[contributor.public.hex()]["rank"] in (1, 2) and "identity" in table
    finally:
        if rec is not None:
            rec.stop()
        c.stop()
        print(c.dump())

    expected = expected_points(rec.states)
    assert set(final) == set(expected) == {contributor.public.hex(), c.signer(3).hex()}
    seq_len = st.config.max_seq_len
    for identity, r in final.items():
        exp = expected[identity]
        assert r["presence_rounds"] == exp["presence_rounds"], (identity, r, exp)
        assert r["sequences"] == exp["sequences"], (identity, r, exp)
        assert r["tokens"] == r["sequences"] * seq_len
        assert r["presence_points"] == r["presence_rounds"] * RATES["presence_points"]
        assert r["compute_points"] == r["tokens"] // RATES["tokens_per_compute_point"]
        assert r["total"] == r["presence_points"] + r["compute_points"]
    # the contributor's two node keys earned more than the third client alone
    mine, theirs = final[contributor.public.hex()], final[c.signer(3).hex()]
    assert mine["presence_rounds"] > theirs["presence_rounds"] > 0
    assert mine["sequences"] > theirs["sequences"] > 0
