"""Applied result sets: what every client keeps of the rounds it applied, and where its model
stands in applying them.

An AppliedSet is the consensus of one step: the results every client applies for it (empty for
a round that trained nothing, or whose results nobody vouched for). Every client keeps the sets
of the last `kept_rounds` steps and serves them to syncing peers (p2p/applied_sharing.py), who
replay them from a snapshot to the agreed parameters.

ModelLine follows the model through those steps: `cursor` is the next step whose set the model
needs; everything before it is applied (or had nothing to apply). It remembers the hash after
each Apply, so the hash of the parameters that train any step since its base can be compared
with the one the witnesses agreed on."""

from dataclasses import dataclass

from .results import TrainingResult

FIRST_STEP = 1  # a run's first step: no round before it


@dataclass(frozen=True)
class AppliedSet:
    step: int
    trained: bool  # the round trained: clients ran an Apply for it, even with no results
    results: tuple  # TrainingResult, in batch order

    def to_json(self) -> dict:
        return {"step": self.step, "trained": self.trained,
                "results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, d, step: int) -> "AppliedSet":
        """The set for `step`, each result's commitment and signature checked; ValueError on
        anything malformed or forged."""
        if (not isinstance(d, dict) or d.get("step") != step or type(d.get("trained")) is not bool
                or not isinstance(d.get("results"), list)):
            raise ValueError(f"malformed applied set for step {step}")
        results = tuple(TrainingResult.from_json(r) for r in d["results"])
        for r in results:
            if r.step != step:
                raise ValueError(f"applied set for step {step} holds a result of step {r.step}")
            why = r.check()
            if why:
                raise ValueError(f"applied set for step {step}: {why}")
        if len({r.batch for r in results}) != len(results):
            raise ValueError(f"applied set for step {step} holds one batch twice")
        return cls(step, d["trained"], tuple(sorted(results, key=lambda r: r.batch)))


class ModelLine:
    """The steps a model has applied since its base (a snapshot, or an epoch's start)."""

    def __init__(self, base_step: int, base_hash: bytes, origin: str):
        """`base_step`: the step the base parameters train; `origin`: "snapshot" or "epoch"."""
        self.base_step, self.base_hash, self.origin = base_step, base_hash, origin
        # a snapshot trains base_step: base_step - 1 is not in it; an epoch's start has every
        # step before it applied (its last two rounds drain: they apply nothing)
        first = base_step - 1 if origin == "snapshot" else base_step
        self.start = self.cursor = max(first, FIRST_STEP)
        self.applies = {}  # step -> hash after its Apply (None until reported)

    def advance(self, s: AppliedSet) -> bool:
        """Take the set of the cursor's step; True when it needs an Apply."""
        assert s.step == self.cursor, (s.step, self.cursor)
        self.cursor += 1
        if s.trained or s.results:
            self.applies[s.step] = None
            return True
        return False

    def reported(self, step: int, digest: bytes) -> None:
        if step in self.applies:
            self.applies[step] = digest

    def trains(self, step: int) -> bool:
        """The model holds the parameters that train `step` now: every set up to `step - 2`
        applied and none after, where a set that applied nothing does not count (so an
        epoch's first step trains on its base: the rounds before it drained)."""
        if self.cursor == step - 1:
            return True
        before = step - 1
        return (self.cursor == step and before not in self.applies
                and (before >= self.start or self.origin == "epoch"))

    def hash_training(self, step: int):
        """The hash of the parameters that train `step` (every step up to step - 2 applied),
        or None when the model is not there or an Apply it needs has not reported yet."""
        last = step - 2
        if step < self.base_step or self.cursor <= last:
            return None
        done = [s for s in self.applies if s <= last]
        if not done:
            return self.base_hash
        return self.applies[max(done)]
