"""The verifier's duty: an elected verifier of a round (`verification_percent`; it trains no
batch that round) judges its seeded sample of the round's results (`verification_sample`: the
config's `verify_sample` each, 3 by default; the samples overlap only when they add up to more
than the round's results) with DistroTrainer.verify,
each against another batch of the same round picked by the round's seed. A result judged bad is
reported with an `evidence` operation while its round is the current or the previous one: the
coordinator puts its trainer in the round's accused mask, so no client applies that result,
and removes the trainer once `evidence_quorum` distinct verifiers accused it in the epoch.
Results the validation refused need no verdict: nobody vouches for them, and the health checks
remove their trainers."""

from psyche_coordinator_core import ClientPhase, RunState, verification_sample
from psyche_coordinator_core.constants import NUM_STORED_ROUNDS

from .actions import Action, Log, Send, Verify


class Verifying:
    def __init__(self, signer: bytes):
        self.signer = signer
        self.plans = {}  # step -> [(batch, compare)] this client judges, [] when not a verifier
        self.asked = set()  # (step, batch) whose verdict was asked for
        self.bad = set()  # (step, trainer signer) this client judged bad

    def _plan(self, st, me, assigned: dict) -> list:
        """This client's sample of the current round (batches), each with the batch it is
        compared against. Worked out once per round (the election costs hashes)."""
        rnd = st.current_round
        batches = sorted(assigned.values())
        if len(batches) < 2:
            return []
        plan = []
        for trainer in verification_sample(st.config, rnd, me):
            target = assigned.get(trainer)
            if target is not None:
                others = [b for b in batches if b != target]
                plan.append((target, others[(rnd.random_seed + me) % len(others)]))
        return plan

    def due(self, st, me, phase, assignments: dict, results: dict, invalid: dict
            ) -> list[Action]:
        """Verify actions for the current round's sample, for each result once it and its
        trainer's result of the step before (see _previous) are here. `assignments`: {step:
        {client index: batch}} of the rounds, `results` {step: {batch: valid result}} and
        `invalid` {step: {batch: why refused}} (the machine's)."""
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
            if (result is None or (step, target) in self.asked
                    or self._accused(st, me, step, result)):
                continue
            known, previous = self._previous(st, step, result, assignments, results, invalid)
            if not known:
                continue
            last = previous
            if previous is not None and self._was_bad(st, step - 1, result.trainer):
                # its claimed lookahead was a bad result: an adversary that trains honestly and
                # publishes a corrupted update stood at its true update, not at the published
                # one, and judged from the published one a flipped result can score as honest.
                # The bare parameters are what its true lookahead is near
                previous = last = None
            elif previous is None:
                last = self._last(st, step, result.trainer, assignments, results, invalid)
            self.asked.add((step, target))
            out.append(Verify(step, result, compare, previous, last))
        return out

    def _last(self, st, step: int, trainer: bytes, assignments: dict, results: dict,
              invalid: dict):
        """The trainer's last valid result before `step` when it trained no batch between
        (for the overlap test: error feedback took that result's coefficients out of its
        momentum, and nothing but this batch's gradient went in since), or None: not known,
        refused, judged bad, or a batch between whose result is not here."""
        # this epoch's steps only: the client indices of `assignments` are the epoch's
        for s in range(step - 1, max(step - 1 - NUM_STORED_ROUNDS, st.start_step - 1), -1):
            prior = assignments.get(s)
            if prior is None:
                return None  # before what this client knows of the epoch
            batch = Verifying._batch_of(st, prior, trainer)
            if batch is None:
                continue  # no batch then: its momentum did not move
            if batch in invalid.get(s, {}) or self._was_bad(st, s, trainer):
                return None
            return results.get(s, {}).get(batch)
        return None

    @staticmethod
    def _previous(st, step: int, result, assignments: dict, results: dict, invalid: dict
                  ) -> tuple[bool, object]:
        """(known, the trainer's valid result of `step - 1`, or None when it trained no batch
        then or its result was refused). A trainer that trained `step - 1` trained `step` at
        its lookahead, that result's update stepped in, and the verifier must stand there too
        (an honest result judged from the bare parameters can score as noise). Not known while
        that result is on its way: the result is judged once it is here. A round with no round
        before it in the epoch has no lookahead (the drain rounds that end an epoch apply every
        set still in flight)."""
        prior = assignments.get(step - 1)
        if prior is None:
            return True, None
        batch = Verifying._batch_of(st, prior, result.trainer)
        if batch is None or batch in invalid.get(step - 1, {}):
            return True, None
        previous = results.get(step - 1, {}).get(batch)
        return previous is not None, previous

    @staticmethod
    def _batch_of(st, assigned: dict, trainer: bytes):
        """The batch `trainer` had in a round's {client index: batch}, or None."""
        return next((b for i, b in assigned.items() if st.clients[i].signer == trainer), None)

    def _was_bad(self, st, step: int, trainer: bytes) -> bool:
        """The trainer's result of `step` was judged bad: by this client, or by a verifier whose
        evidence put it in that round's accused mask (while the round is stored)."""
        return (step, trainer) in self.bad or self._in_accused_mask(st, step, trainer)

    @staticmethod
    def _in_accused_mask(st, step: int, trainer: bytes) -> bool:
        """The round that trained `step` is still stored and its accused mask has `trainer`."""
        i = st.client_index(trainer)
        back = st.step - step
        rnd = st.round_back(back) if 0 <= back < NUM_STORED_ROUNDS else None
        return i is not None and rnd is not None and bool(rnd.accused >> i & 1)

    @staticmethod
    def _accused(st, me, step: int, result) -> bool:
        """Evidence would change nothing: this client accused the trainer in this epoch already,
        and the result is in its round's accused mask."""
        i = st.client_index(result.trainer)
        return (i is not None and bool(st.clients[i].accusers >> me & 1)
                and Verifying._in_accused_mask(st, step, result.trainer))

    def verdict(self, st, me, step: int, result, bad: bool, detail: str) -> list[Action]:
        who = result.trainer.hex()[:8]
        if not bad:
            return [Log(f"verified the result of {who} for step {step}: good ({detail})")]
        acts = [Log(f"verified the result of {who} for step {step}: BAD ({detail})")]
        self.bad.add((step, result.trainer))
        target = st.client_index(result.trainer)
        if (me is None or target is None or st.step - step not in (0, 1)
                or st.run_state not in (RunState.RoundTrain, RunState.RoundWitness)):
            return acts + [Log(f"evidence against {who} not sent: its round is over")]
        if self._accused(st, me, step, result):
            return acts
        return acts + [Send("evidence", {"signer": self.signer, "index": me, "step": step,
                                         "target": target})]

    def forget(self, before: int) -> None:
        self.asked = {k for k in self.asked if k[0] >= before}
        self.bad = {k for k in self.bad if k[0] >= before - 1}
        self.plans = {s: p for s, p in self.plans.items() if s >= before}
