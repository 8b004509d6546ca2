"""The checkpointer's duty, as part of the client state machine (no I/O, no clock).

When: at RoundTrain of a step s that checkpoint_interval divides (the parameters then are those
the witnesses of step s commit: every step up to s-2 applied), and at Cooldown once the epoch's
last apply is asked for (labelled with the last round's step, whose witnesses committed the
epoch's final parameters: the two drain rounds before Cooldown train nothing). Who: an elected
checkpointer of the round (RoundCommittee.is_checkpointer; percent 0 = anyone) that can write to
the run's store. The daemon captures, writes and uploads (StoreSnapshot) and reports the
location; the checkpoint operation goes out once the state shows the same (step, hash) as agreed
(param_* or due_*), never for another hash. A client with --checkpoint-dir also keeps each
snapshot on disk, elected or not."""

from psyche_coordinator_core import RoundCommittee

from .actions import Action, Log, PruneSnapshots, Send, StoreSnapshot

ZERO = bytes(32)


class Checkpointing:
    def __init__(self, signer: bytes, can_store: bool = False, saves_locally: bool = False):
        self.signer, self.can_store, self.saves_locally = signer, can_store, saves_locally
        self.captured = set()  # steps a snapshot was asked for
        self.pending = {}  # step -> (param hash, location): stored, not yet recorded
        self.stored_at = {}  # step -> (param hash, location) of every snapshot stored
        self.recorded = []  # (step, location) the coordinator accepted

    def _elected(self, st, me: int) -> bool:
        committee = RoundCommittee(st.current_round, 0, 0, st.config.checkpointer_percent)
        return committee.is_checkpointer(me)

    def _capture(self, st, me: int, step: int) -> list[Action]:
        if step in self.captured:
            return []
        upload = self.can_store and self._elected(st, me)
        if not (upload or self.saves_locally):
            return []
        self.captured.add(step)
        return [StoreSnapshot(st.epoch, step, upload)]

    def at_round(self, st, me: int) -> list[Action]:
        """RoundTrain of `st.step`: a snapshot point when checkpoint_interval divides it."""
        interval = st.config.checkpoint_interval
        if not interval or st.step % interval or st.step == 0:
            return []
        return self._capture(st, me, st.step)

    def at_cooldown(self, st, me: int) -> list[Action]:
        """Cooldown: every round of the epoch is applied (the caller asked for it first)."""
        last = st.current_round
        if st.round_trains(last):
            # the epoch ended without its drain rounds (paused, below quorum or min_clients):
            # its last trained round is never applied, and the parameters after the one before
            # it are not what any witness committed
            if self.saves_locally and st.step - 1 not in self.captured:
                self.captured.add(st.step - 1)
                return [StoreSnapshot(st.epoch, st.step - 1, False),
                        Log(f"epoch {st.epoch} ended without its drain rounds: its final "
                            "parameters have no agreed hash, the snapshot is kept only locally")]
            return []
        step = st.step - 1
        if step in self.stored_at:
            # stored already as a snapshot point (the drain rounds changed nothing since):
            # recording it again in Cooldown ends the Cooldown
            self.pending[step] = self.stored_at[step]
            return []
        return self._capture(st, me, step)

    def stored(self, step: int, params: bytes, location: str) -> None:
        self.pending[step] = self.stored_at[step] = (bytes(params), location)

    def record(self, st, me) -> list[Action]:
        """The checkpoint operation for every stored snapshot whose (step, hash) the state
        shows as agreed; a snapshot whose step was agreed with another hash, or passed without
        agreement, is dropped with the reason."""
        if st is None or me is None or not self.pending:
            return []
        agreed = {}
        if st.due_hash != ZERO:
            agreed[st.due_step] = st.due_hash
        if st.param_hash != ZERO:
            agreed[st.param_step] = st.param_hash
        acts = []
        for step, (params, location) in sorted(self.pending.items()):
            if step in agreed:
                del self.pending[step]
                if agreed[step] != params:
                    acts.append(Log(
                        f"not recording the snapshot of step {step}: its parameters hash to "
                        f"{params.hex()[:16]}, the witnesses agreed on {agreed[step].hex()[:16]}"))
                    continue
                acts.append(Send("checkpoint", {"signer": self.signer, "index": me,
                                                "repo": location, "step": step,
                                                "param_hash": params}))
            elif st.param_step > step:
                del self.pending[step]
                acts.append(Log(f"not recording the snapshot of step {step}: no witness quorum "
                                "agreed on that step's parameters"))
        return acts

    def answered(self, code, args: dict) -> list[Action]:
        if code is None:
            self.recorded.append((args["step"], args["repo"]))
            return [Log(f"snapshot of step {args['step']} recorded at {args['repo']}"),
                    PruneSnapshots()]
        if code == "Unreachable":  # sent again with the next state, if still agreed
            self.pending[args["step"]] = (args["param_hash"], args["repo"])
        return []
