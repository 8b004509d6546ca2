"""A joiner SIGKILLed in each phase of its join, and restarted with the same identity, on the
centralized backend with real training (a tiny Llama, DisTrO): parameter hashes are only
meaningful with a real model (the simulated trainer's hash is a function of the step alone).

Three incumbents train; a helper joiner (client 4) takes the one sync slot (max_syncing = 1) so
that the joiner under test (client 5) waits Queued behind it. The helper holds the slot by
construction, not by timing: it withholds its `synced` while a hold file exists, removed once a
restart of client 5 has come back Queued (on a loaded machine a restart once came back after
the helper had synced and warmed up, and found the slot free). Client 5 is killed once in each
of Queued, Syncing, WarmingUp and Active, in turn, in one run; the server withdraws it when its
connection closes. Each restart:
(a) re-enters at once: Queued at the queue's tail with `since` = the step of its join, or
    Syncing from that step when the slot is free, and a queued one starts syncing within one
    round of the slot freeing; it goes on through the sync phases (the last restart to Active);
(b) changes nothing for the incumbents: for every step they all applied the same set and hold
    the same parameter hash, they never leave phase Active, and no result of the joiner is
    applied for a round in which it was warming up. The joiners' own hashes after every step
    they applied are the incumbents'. No process of client 5 is dropped by a health check.

The kill comes from the thread that records the states, the moment one shows client 5 in the
phase (Syncing may last well under a second); a kill that lands past the phase is tried again on
the next restart. The joiners' processes start held (their imports are not counted in the run's
clock); the next incarnation of client 5 is released as soon as the coordinator shows the
kill's withdrawal (the core's health check does not blame a slot taken back for the batches of
its killed process: a client answers only for rounds since it entered its phase). The joiners
replay from the run seed (no snapshot store: the run's checkpoint is the seed), so every restart
replays every applied set since step 1 from its peers (kept_rounds covers the run)."""

import signal
from pathlib import Path

import pytest
import tomli_w

from psyche_coordinator_core import ClientPhase, ClientState, RunState

from . import harness
from .harness import Cluster
from .recorder import Recorder
from .test_training import applied_params, read_metrics

pytest.importorskip("iroh")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(2400)]
WARM = 5  # sync_warmup_rounds: client 5's WarmingUp lasts long enough to be killed in
INCUMBENTS = (1, 2, 3)
HELPER, JOINER = 4, 5
TARGETS = (ClientPhase.Queued, ClientPhase.Syncing, ClientPhase.WarmingUp, ClientPhase.Active)
ATTEMPTS = 5  # a phase that ended between the state that showed it and the kill is tried again
WAIT = 900  # generous: two shared cores; nothing here measures time
READY = "held client: imports done"
HOLD_SYNC = ".hold-sync"
# the harness's held client, saying when its imports are done (a restart released before that
# would join tens of seconds after the kill), and withholding its `synced` while the file
# <its key>.hold-sync exists: it stays Syncing, holding the sync slot, until the test says
HELD_CLIENT = harness.HELD_CLIENT.replace("sys.stdin.readline()", f"""\
print({READY!r}, flush=True)
sys.stdin.readline()
import os
from psyche_client.client.sync import Sync
hold = sys.argv[sys.argv.index("--identity-secret-key-path") + 1] + {HOLD_SYNC!r}
say_synced = Sync._synced
Sync._synced = lambda self: [] if os.path.exists(hold) else say_synced(self)""")


def write_run(tmp: Path, data: Path) -> Path:
    path = tmp / "state.toml"
    path.write_text(tomli_w.dumps({
        "run_id": "join-killed", "run_seed": 1313,
        "config": dict(warmup_time=30, cooldown_time=20, max_round_train_time=20,
                       round_witness_time=2, epoch_time=100000, total_steps=2000,
                       max_seq_len=64, min_clients=2, init_min_clients=3, witness_nodes=0,
                       global_batch_size_start=8, global_batch_size_end=8,
                       waiting_for_members_extra_time=1, max_syncing=1, kept_rounds=5000,
                       sync_warmup_rounds=WARM),
        "model": dict(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                      intermediate_size=128, max_seq_len=64),
        "optimizer": dict(kind="distro", lr=0.003, warmup_steps=2, chunk=32, topk=16),
        "data": dict(kind="local", dir=str(data / "train"), token_size=2,
                     shuffle_seed="6c" * 32, heldout_dir=str(data / "heldout"),
                     heldout_sequences=8),
    }))
    return path


def phase(st, signer):
    """The client's phase, None when it is not a healthy client of the epoch."""
    i = st.client_index(signer)
    if i is None or st.clients[i].state != ClientState.Healthy:
        return None
    return st.clients[i].phase


def reached(st, signer, target):
    """The client is in `target` or a later phase of its join."""
    p = phase(st, signer)
    return p is not None and TARGETS.index(p) >= TARGETS.index(target)


def queue_key(st, signer):
    i = st.client_index(signer)
    return st.clients[i].since, i


def test_a_joiner_killed_in_each_phase_comes_back(tmp_path, data_dir, monkeypatch):
    pytest.importorskip("torch")
    assert HELD_CLIENT != harness.HELD_CLIENT
    monkeypatch.setattr(harness, "HELD_CLIENT", HELD_CLIENT)
    c = Cluster(tmp_path, write_run(tmp_path, data_dir))
    metrics = {n: tmp_path / f"client-{n}.jsonl" for n in (*INCUMBENTS, HELPER, JOINER)}

    def start(n, held=False):
        return c.start_client(n, held=held, extra=("--torch-threads", "1", "--metrics-file",
                                                   str(metrics[n]), "--micro-batch-size", "4"))

    incarnations = []  # the processes of client 5, in order
    kills = []  # (target phase, index of the last state showing it healthy, index of the
    #            state it is withdrawn in, index of the state it is back in)
    rec = None
    try:
        c.start_server()
        rec = Recorder(c.port, c.run_id)
        for n in INCUMBENTS:
            start(n)
        hold = c.tmp / f"client-{HELPER}.key{HOLD_SYNC}"
        hold.touch()  # the helper stays Syncing until a restart of client 5 comes back Queued
        helper = start(HELPER, held=True)
        incarnations.append(start(JOINER, held=True))
        spare = start(JOINER, held=True)  # the next incarnation, ready before each kill
        five = c.signer(JOINER)
        four = c.signer(HELPER)
        k, _ = rec.wait(lambda s: s.run_state == RunState.RoundTrain and s.step >= 3, WAIT,
                        "the incumbents' step 3")
        helper.release()
        k, _ = rec.wait(lambda s: phase(s, four) == ClientPhase.Syncing, WAIT,
                        "the helper joiner to sync", k)
        # each incarnation's kill is armed before it joins: killed from the recording thread
        # the moment the coordinator shows it in the target phase (or past it: then that
        # attempt misses, and the next restart goes through the phases again)
        todo = [t for t in TARGETS for _ in range(ATTEMPTS)]
        target = todo.pop(0)

        def arm(victim, target):
            rec.arm(lambda s: reached(s, five, target),
                    lambda: victim.p.send_signal(signal.SIGKILL))
        arm(incarnations[-1], target)
        incarnations[-1].release()
        while target is not None:
            k = rec.wait_fired(WAIT, f"client 5 in {target.name}")
            incarnations[-1].kill()  # reaped
            gone, _ = rec.wait(lambda s: phase(s, five) is None, WAIT, "client 5's withdrawal",
                               k)
            killed_in = phase(rec.states[gone - 1], five)
            todo = [t for t in todo if t != killed_in]
            nxt = todo.pop(0) if todo else None
            spare.wait_line(READY, WAIT)
            if nxt is not None:
                arm(spare, nxt)
            spare.release()
            incarnations.append(spare)
            back, _ = rec.wait(lambda s: phase(s, five) is not None, WAIT,
                               "client 5 to join again", gone)
            kills.append((target, gone - 1, gone, back))
            if phase(rec.states[back], five) == ClientPhase.Queued:
                hold.unlink(missing_ok=True)  # the helper syncs, and later frees the slot
            k, target = back, nxt
            if target is not None:
                spare = start(JOINER, held=True)  # imports while this one runs
        # the last one goes on to sync, turns Active and has a result applied
        k, _ = rec.wait(lambda s: phase(s, five) == ClientPhase.Active, WAIT,
                        "the last restart of client 5 to turn Active", k)
        active_from = rec.states[k].step

        def applied_after(s):
            return s.step > active_from + 3 and any(
                r["event"] == "apply" and r["step"] >= active_from and five.hex() in r["trainers"]
                for r in read_metrics(metrics[1]))
        rec.wait(applied_after, WAIT, "a result of client 5 applied after its last restart", k)
    finally:
        c.stop()
        if rec is not None:
            rec.stop()
        print(c.dump())  # shown by pytest only when the test fails
    states = rec.states
    logs = {n: read_metrics(p) for n, p in metrics.items()}

    # every phase saw a kill while the coordinator showed client 5 in it
    killed_in = [phase(states[last], five) for _, last, _, _ in kills]
    assert set(killed_in) == set(TARGETS), [p.name for p in killed_in]
    assert all(states[gone].clients[states[gone].client_index(five)].state
               == ClientState.Withdrawn for _, _, gone, _ in kills)
    # no process of client 5 was dropped (by a health check) in between: each one stayed
    dropped = [st.step for st in states if st.client_index(five) is not None
               and st.clients[st.client_index(five)].state == ClientState.Dropped]
    assert not dropped, dropped

    # (a) each restart re-enters at the step of its join: Queued at the queue's tail, or
    # Syncing when the slot is free. The server ticks right after applying a join, so the
    # first state that shows it may already be a step on (CI saw since 11 in a step-12 state):
    # the join's step lies between the last state without client 5 and the first with it
    entered = []
    for _, _, _, back in kills:
        st = states[back]
        p, (since, index) = phase(st, five), queue_key(st, five)
        assert p in (ClientPhase.Queued, ClientPhase.Syncing), p
        assert states[back - 1].step <= since <= st.step, (states[back - 1].step, since, st.step)
        if p == ClientPhase.Queued:
            queued = [queue_key(st, x.signer) for x in st.clients
                      if x.state == ClientState.Healthy and x.phase == ClientPhase.Queued]
            assert max(queued) == (since, index)
            assert st.syncing_count() >= st.config.max_syncing  # queued: the slot was taken
        entered.append(p)
    assert ClientPhase.Queued in entered, "no restart found the sync slot taken"
    # the hold: the helper was still Syncing when the first restart was back (Queued)
    assert phase(states[kills[0][3]], four) == ClientPhase.Syncing
    # a queued client 5 starts syncing in the round the slot frees (the helper turns Active at
    # that round's start), or within one round when the slot frees mid-round
    for (_, _, _, back), p in zip(kills, entered):
        if p == ClientPhase.Queued:
            st = next((s for s in states[back:] if phase(s, five) != ClientPhase.Queued), None)
            assert st is not None and phase(st, five) == ClientPhase.Syncing
            h = st.clients[st.client_index(four)]
            assert h.phase == ClientPhase.Active and st.clients[
                st.client_index(five)].since == h.since == st.step
    for k, st in enumerate(states):
        if phase(st, five) == ClientPhase.Queued and st.syncing_count() < st.config.max_syncing:
            nxt = next((s for s in states[k:] if phase(s, five) != ClientPhase.Queued), None)
            assert nxt is not None and phase(nxt, five) == ClientPhase.Syncing
            assert nxt.step <= st.step + 1
    # every restart went on to sync (the next kill's target, or the last one's Active)
    for (_, _, _, back), after in zip(kills, [*(kills[1:]), None]):
        end = after[2] if after else len(states)
        seen = {phase(s, five) for s in states[back:end]}
        assert ClientPhase.Syncing in seen, [p and p.name for p in seen]
    assert "[SYNC] Sync complete." in "\n".join(incarnations[-1].lines)
    queued_runs = [p for p in incarnations if any("[SYNC] queued: position" in ln
                                                  for ln in p.lines)]
    assert queued_runs, "no incarnation of client 5 logged its queue position"

    # (b) the incumbents: one applied set and one parameter hash per step, all three at every
    # step; never out of phase Active; no lag
    by_step = applied_params({n: logs[n] for n in (*INCUMBENTS, HELPER, JOINER)})
    trainers = {}
    for n in INCUMBENTS:
        for r in logs[n]:
            if r["event"] == "apply":
                trainers.setdefault(r["step"], {}).setdefault(n, set()).add(
                    tuple(sorted(r["trainers"])))
    # up to the last step all three applied before they were stopped (one by one)
    last = min(max(r["step"] for r in logs[n] if r["event"] == "apply") for n in INCUMBENTS)
    steps = sorted(s for s in trainers if s <= last)
    assert len(steps) >= 20 and steps == list(range(steps[0], last + 1))
    for s in steps:
        by = trainers[s]
        assert set(by) == set(INCUMBENTS), f"step {s} applied by {sorted(by)}"
        assert len(set().union(*by.values())) == 1, f"step {s}: applied sets differ: {by}"
        hashes = set().union(*(by_step[s][n] for n in INCUMBENTS))
        assert len(hashes) == 1, f"step {s}: incumbents' parameters differ: {by_step[s]}"
    for st in states:
        if st.run_state in (RunState.Warmup, RunState.RoundTrain, RunState.RoundWitness):
            for n in INCUMBENTS:
                assert phase(st, c.signer(n)) == ClientPhase.Active, (n, st.step)
    for n in INCUMBENTS:
        out = "\n".join(c.clients[n].lines)
        assert "DESYNC" not in out and "[SYNC] lagging" not in out, n
    # the joiners' parameters after every step they applied are the incumbents'
    for n in (HELPER, JOINER):
        mine = [s for s, by in by_step.items() if n in by and s <= last]
        assert mine, n
        for s in mine:
            assert s in steps, f"client {n} applied step {s} that the incumbents did not"
            assert by_step[s][n] == by_step[s][1], f"client {n}, step {s}: {by_step[s]}"
    # results of a warming round are never applied (client 5's every incarnation, and 4's)
    warming = {}
    for st in states:
        if st.run_state == RunState.RoundTrain:
            for n in (HELPER, JOINER):
                i = st.client_index(c.signer(n))
                if i is not None and st.current_round.warming >> i & 1:
                    warming.setdefault(n, set()).add(st.step)
    assert warming.get(JOINER), "client 5 was never seen warming up"
    for n in (HELPER, JOINER):
        hexed = c.signer(n).hex()
        applied = {s for s in steps if hexed in next(iter(trainers[s][1]))}
        assert not applied & warming.get(n, set()), (n, sorted(applied & warming[n]))
        assert applied, f"no result of client {n} was ever applied"
