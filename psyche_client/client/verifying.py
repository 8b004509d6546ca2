"""The verifier's duty: an elected verifier of a round (`verification_percent`; it trains no
batch that round) judges a seeded sample of the round's results (the one assign_verifications
gives it and the next SAMPLE - 1 in the round's batch order) with the loss-improvement test
(DistroTrainer.verify), each against another batch of the same round picked by the round's seed.
A result judged bad is reported with an `evidence` operation while its round is the current or
the previous one; the coordinator removes a trainer once `evidence_quorum` distinct verifiers
reported it. Results the validation refused need no verdict: nobody vouches for them, and the
health checks remove their trainers."""

from psyche_coordinator_core import (
    ClientPhase,
    Committee,
    RoundCommittee,
    RunState,
    assign_verifications,
)

from .actions import Action, Log, Send, Verify

# results one verifier judges per round: with a fifth of a round's clients verifying, every
# result is judged about once a round (each judgement costs four forward passes of one batch)
SAMPLE = 3


class Verifying:
    def __init__(self, signer: bytes):
        self.signer = signer
        self.plans = {}  # step -> [(batch, compare)] this client judges, [] when not a verifier
        self.asked = set()  # (step, batch) whose verdict was asked for

    def _plan(self, st, me, assigned: dict) -> list:
        """The seeded sample of the current round this client judges, each with the batch it is
        compared against: the batch assign_verifications gives it, then the next SAMPLE - 1 in
        the round's batch order. Worked out once per round (the election costs hashes)."""
        rnd = st.current_round
        committee = RoundCommittee(rnd, st.config.witness_nodes, st.config.verification_percent)
        if committee.committee(me) != Committee.Verifier:
            return []
        batches = sorted(assigned.values())
        mine = assign_verifications(st.config, rnd, committee).get(me)
        if mine is None or len(batches) < 2:
            return []
        first = batches.index(mine)
        plan = []
        for j in range(min(SAMPLE, len(batches))):
            target = batches[(first + j) % len(batches)]
            others = [b for b in batches if b != target]
            plan.append((target, others[(rnd.random_seed + me) % len(others)]))
        return plan

    def due(self, st, me, phase, assignments: dict, results: dict) -> list[Action]:
        """Verify actions for the current round's sample, for each result once it is here and
        valid. `assignments`: {step: {client index: batch}} of the rounds (the machine's)."""
        if (me is None or phase != ClientPhase.Active or not st.config.verification_percent
                or st.run_state not in (RunState.RoundTrain, RunState.RoundWitness)
                or not st.round_trains(st.current_round)):
            return []
        step = st.round_step(st.current_round)
        if step not in assignments:
            return []
        if step not in self.plans:
            self.plans[step] = self._plan(st, me, assignments[step])
        out = []
        for target, compare in self.plans[step]:
            result = results.get(step, {}).get(target)
            if result is None or (step, target) in self.asked or self._accused(st, me, result):
                continue
            self.asked.add((step, target))
            out.append(Verify(step, result, compare))
        return out

    @staticmethod
    def _accused(st, me, result) -> bool:
        """This client already accused the trainer in this epoch: once is all that counts."""
        i = st.client_index(result.trainer)
        return i is not None and bool(st.clients[i].accusers >> me & 1)

    def verdict(self, st, me, step: int, result, bad: bool, detail: str) -> list[Action]:
        who = result.trainer.hex()[:8]
        if not bad:
            return [Log(f"verified the result of {who} for step {step}: good ({detail})")]
        acts = [Log(f"verified the result of {who} for step {step}: BAD ({detail})")]
        target = st.client_index(result.trainer)
        if (me is None or target is None or st.step - step not in (0, 1)
                or st.run_state not in (RunState.RoundTrain, RunState.RoundWitness)):
            return acts + [Log(f"evidence against {who} not sent: its round is over")]
        if self._accused(st, me, result):
            return acts
        return acts + [Send("evidence", {"signer": self.signer, "index": me, "step": step,
                                         "target": target})]

    def forget(self, before: int) -> None:
        self.asked = {k for k in self.asked if k[0] >= before}
        self.plans = {s: p for s, p in self.plans.items() if s >= before}
