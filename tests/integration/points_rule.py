"""The points a round's end credits, derived from recorded coordinator states with the core's
own functions (docs/points.md): what the points tests on both backends check the leaderboard
against, independently of the core's `_credit_round`."""

from psyche_coordinator_core import ClientState, assign_batches
from psyche_coordinator_core.committee import expected_witnesses, witness_quorum
from psyche_coordinator_core.coordinator import trainer_score


def round_credits(s, ended, trained) -> dict:
    """{slot index: (presence, sequences)} credited when round `ended` ends: `s` is the state
    just before that end (its clients and config), `trained` the round before `ended` (None in
    an epoch's first round). Presence for every healthy slot; the sequences of the trainers of
    `trained` that a witness quorum of `ended` vouched for."""
    out = {i: (1 if c.state == ClientState.Healthy else 0, 0) for i, c in enumerate(s.clients)}
    if trained is None or not s.round_trains(trained) or not ended.witnesses:
        return out
    quorum = witness_quorum(expected_witnesses(s.config.witness_nodes,
                                               len(ended.participant_indices())))
    for index, batch in assign_batches(s.config, trained).items():
        if trainer_score(s, ended, s.clients[index].signer) >= quorum:
            out[index] = (out[index][0], len(batch))
    return out
