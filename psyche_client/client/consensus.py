"""Which results of a round every client applies: those a quorum of the next round's witnesses
received. Witnesses of round r+1 put the commitments of round r's results they verified in their
broadcast blooms; a result counts when at least witness_quorum(elected witnesses of r+1) blooms
contain its commitment. Everyone reads the same blooms from the coordinator, so everyone who
holds the payloads applies the same set. Results of trainers that were warming up in round r
(its `warming` mask: synced clients warming their optimizer state) are witnessed but never
applied, nor are those an elected verifier judged bad (its `accused` mask, frozen once the
round is final)."""

from psyche_coordinator_core import (
    bloom_contains,
    expected_witnesses,
    trainer_score,
    witness_quorum,
)


def round_consensus(state, witnessed_round, assignments: dict, received: dict, warming: int = 0,
                    accused: int = 0):
    """(results to apply in batch order, batches the witnesses accepted that we lack).

    `assignments`: {client_index: BatchId} of round r; `received`: {BatchId: TrainingResult}
    (first verified result per batch); `witnessed_round`: round r+1, whose witnesses vouch;
    `warming`, `accused`: round r's masks of trainers whose results are not applied."""
    elected = expected_witnesses(state.config.witness_nodes,
                                 len(witnessed_round.participant_indices()))
    quorum = witness_quorum(elected)
    chosen, missing = [], []
    for idx, batch in sorted(assignments.items(), key=lambda kv: kv[1]):
        if (warming | accused) >> idx & 1:
            continue
        r = received.get(batch)
        if r is not None:
            key = r.commitment.hex()
            votes = sum(1 for w in witnessed_round.witnesses
                        if bloom_contains(w.broadcast_bloom, key))
            if votes >= quorum:
                chosen.append(r)
                continue
        # nothing we hold has a quorum: if the witnesses vouched for this trainer, a result
        # exists that we never received, and applying without it would diverge from the run
        signer = state.clients[idx].signer if idx < len(state.clients) else None
        if signer is not None and trainer_score(state, witnessed_round, signer) >= quorum:
            missing.append(batch)
    return chosen, missing
