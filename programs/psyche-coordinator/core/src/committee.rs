//! Who does what in a round (`committee.py`): trainers, verifiers, witnesses, checkpointers, and
//! the quorum.
//!
//! Selection runs over the round's participants in index order: participant k is the k-th set
//! bit of `Round::participants`. Each role draws its members with `shuffle::draw_first`, seeded
//! by sha256(sha256(random_seed_le) || salt): the first `limit` drawn are elected.

use crate::constants::{
    CHECKPOINTER_SALT, COMMITTEE_SALT, MAX_CLIENTS, MAX_WITNESSES, WITNESS_SALT,
};
use crate::shuffle::{draw_first, sha256};
use crate::state::Round;

/// The election seed of a round for one salt.
pub fn election_seed(rnd: &Round, salt: &[u8]) -> [u8; 32] {
    let base = sha256(&[&rnd.random_seed.to_le_bytes()]);
    sha256(&[&base, salt])
}

/// Witnesses elected for a round of `participants` clients.
pub fn expected_witnesses(witness_nodes: u16, participants: usize) -> usize {
    let wanted = if witness_nodes != 0 {
        witness_nodes as usize
    } else {
        MAX_WITNESSES
    };
    wanted.min(participants)
}

/// Witnesses that must agree: all of 1 or 2, 2 of 3, otherwise two thirds rounded down.
pub fn witness_quorum(elected: usize) -> usize {
    match elected {
        0..=2 => elected,
        3 => 2,
        _ => (elected * 2 / 3).max(1),
    }
}

/// Witnesses that must commit one parameter hash for it to be agreed: a witness quorum that is
/// also a strict majority, so that no two hashes can both reach it in a round.
pub fn param_quorum(elected: usize) -> usize {
    witness_quorum(elected).max(elected / 2 + 1)
}

pub fn verifier_count(participants: usize, verification_percent: u8) -> usize {
    participants * verification_percent as usize / 100
}

/// 0 means nobody is elected and any client may checkpoint.
pub fn checkpointer_count(participants: usize, checkpointer_percent: u8) -> usize {
    if checkpointer_percent == 0 || participants == 0 {
        return 0;
    }
    (participants * checkpointer_percent as usize)
        .div_ceil(100)
        .max(1)
}

/// k such that client_index is the k-th participant of the round, or None.
pub fn ordinal(rnd: &Round, client_index: usize) -> Option<usize> {
    if !rnd.is_participant(client_index) {
        return None;
    }
    let full = client_index / 8;
    let below = rnd.participants[..full]
        .iter()
        .map(|b| b.count_ones() as usize)
        .sum::<usize>();
    let partial = (rnd.participants[full] & ((1u8 << (client_index % 8)) - 1)).count_ones();
    Some(below + partial as usize)
}

pub fn is_witness(rnd: &Round, witness_nodes: u16, client_index: usize) -> bool {
    let Some(k) = ordinal(rnd, client_index) else {
        return false;
    };
    let n = rnd.participant_total();
    elected(
        rnd,
        WITNESS_SALT,
        expected_witnesses(witness_nodes, n),
        n,
        k,
    )
}

pub fn is_checkpointer(rnd: &Round, checkpointer_percent: u8, client_index: usize) -> bool {
    let n = rnd.participant_total();
    let count = checkpointer_count(n, checkpointer_percent);
    if count == 0 {
        return true;
    }
    let Some(k) = ordinal(rnd, client_index) else {
        return false;
    };
    elected(rnd, CHECKPOINTER_SALT, count, n, k)
}

/// Whether participant ordinal `k` (of `n`) is among the first `limit` drawn under `salt`.
fn elected(rnd: &Round, salt: &[u8], limit: usize, n: usize, k: usize) -> bool {
    let mut drawn = [0u8; MAX_CLIENTS];
    let count = draw_first(&election_seed(rnd, salt), n, limit, &mut drawn);
    drawn[..count].iter().any(|&d| d as usize == k)
}

/// Participants (index order) among the first `limit` drawn under `salt` (`below`) or not
/// (`!below`), into `out`; returns how many.
fn select(
    rnd: &Round,
    salt: &[u8],
    limit: usize,
    below: bool,
    out: &mut [u8; MAX_CLIENTS],
) -> usize {
    let mut indices = [0u8; MAX_CLIENTS];
    let n = rnd.participant_indices(&mut indices);
    let mut count = 0;
    if limit == 0 {
        // nobody is drawn: skip the draws
        if !below {
            out[..n].copy_from_slice(&indices[..n]);
            count = n;
        }
        return count;
    }
    let mut is_drawn = [false; MAX_CLIENTS];
    mark_drawn(rnd, salt, limit, n, &mut is_drawn);
    for k in 0..n {
        if is_drawn[k] == below {
            out[count] = indices[k];
            count += 1;
        }
    }
    count
}

/// `trainers` and `verifiers` (index order) from one shuffle, for callers that need both:
/// returns (trainer count, verifier count).
pub fn split(
    rnd: &Round,
    verification_percent: u8,
    trainers: &mut [u8; MAX_CLIENTS],
    verifiers: &mut [u8; MAX_CLIENTS],
) -> (usize, usize) {
    let v = verifier_count(rnd.participant_total(), verification_percent);
    let mut indices = [0u8; MAX_CLIENTS];
    let n = rnd.participant_indices(&mut indices);
    let mut is_verifier = [false; MAX_CLIENTS];
    mark_drawn(rnd, COMMITTEE_SALT, v, n, &mut is_verifier);
    let (mut t, mut w) = (0, 0);
    for k in 0..n {
        if is_verifier[k] {
            verifiers[w] = indices[k];
            w += 1;
        } else {
            trainers[t] = indices[k];
            t += 1;
        }
    }
    (t, w)
}

/// Marks the participants (by ordinal, of `n`) among the first `limit` drawn under `salt`.
fn mark_drawn(rnd: &Round, salt: &[u8], limit: usize, n: usize, marks: &mut [bool; MAX_CLIENTS]) {
    if limit == 0 {
        return;
    }
    let mut drawn = [0u8; MAX_CLIENTS];
    let count = draw_first(&election_seed(rnd, salt), n, limit, &mut drawn);
    for &k in &drawn[..count] {
        marks[k as usize] = true;
    }
}

/// `RoundCommittee.trainers()`: participants that train, in index order.
pub fn trainers(rnd: &Round, verification_percent: u8, out: &mut [u8; MAX_CLIENTS]) -> usize {
    let v = verifier_count(rnd.participant_total(), verification_percent);
    select(rnd, COMMITTEE_SALT, v, false, out)
}

/// `RoundCommittee.verifier_indices()`: participants that verify, in index order.
pub fn verifiers(rnd: &Round, verification_percent: u8, out: &mut [u8; MAX_CLIENTS]) -> usize {
    let v = verifier_count(rnd.participant_total(), verification_percent);
    select(rnd, COMMITTEE_SALT, v, true, out)
}

/// `RoundCommittee.witness_indices()`: elected witnesses, in index order.
pub fn witnesses(rnd: &Round, witness_nodes: u16, out: &mut [u8; MAX_CLIENTS]) -> usize {
    let elected = expected_witnesses(witness_nodes, rnd.participant_total());
    select(rnd, WITNESS_SALT, elected, true, out)
}

/// Whether a participant verifies (`RoundCommittee.committee(i) == Verifier`); None if it does
/// not take part in the round.
pub fn is_verifier(rnd: &Round, verification_percent: u8, client_index: usize) -> Option<bool> {
    let k = ordinal(rnd, client_index)?;
    let n = rnd.participant_total();
    let v = verifier_count(n, verification_percent);
    Some(v > 0 && elected(rnd, COMMITTEE_SALT, v, n, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::sample_round;

    fn list(f: impl Fn(&mut [u8; MAX_CLIENTS]) -> usize) -> Vec<u8> {
        let mut out = [0u8; MAX_CLIENTS];
        let n = f(&mut out);
        out[..n].to_vec()
    }

    #[test]
    fn committee_known_answers_from_python() {
        // RoundCommittee(r, 3, 25, 30): witnesses [2, 6, 8], trainers [0, 2, 3, 5, 6, 9, 11],
        // verifiers [4, 8], checkpointers [3, 6, 11]
        let r = sample_round();
        assert_eq!(list(|o| witnesses(&r, 3, o)), [2, 6, 8]);
        assert_eq!(list(|o| trainers(&r, 25, o)), [0, 2, 3, 5, 6, 9, 11]);
        assert_eq!(list(|o| verifiers(&r, 25, o)), [4, 8]);
        let ck: Vec<usize> = (0..12)
            .filter(|&i| r.is_participant(i) && is_checkpointer(&r, 30, i))
            .collect();
        assert_eq!(ck, [3, 6, 11]);
        for i in 0..16 {
            assert_eq!(is_witness(&r, 3, i), [2, 6, 8].contains(&i), "witness {i}");
        }
        let (mut t, mut v) = ([0u8; MAX_CLIENTS], [0u8; MAX_CLIENTS]);
        let (nt, nv) = split(&r, 25, &mut t, &mut v);
        assert_eq!(
            (&t[..nt], &v[..nv]),
            (&[0, 2, 3, 5, 6, 9, 11][..], &[4, 8][..])
        );
        assert_eq!(is_verifier(&r, 25, 4), Some(true));
        assert_eq!(is_verifier(&r, 25, 0), Some(false));
        assert_eq!(is_verifier(&r, 25, 1), None);
    }

    #[test]
    fn quorum_counts_and_ordinals() {
        let q: Vec<usize> = (0..=7).map(witness_quorum).collect();
        assert_eq!(q, [0, 1, 2, 2, 2, 3, 4, 4]);
        assert_eq!(witness_quorum(32), 21);
        let p: Vec<usize> = (1..=7).map(param_quorum).collect();
        assert_eq!(p, [1, 2, 2, 3, 3, 4, 4]);
        assert_eq!(param_quorum(32), 21);
        assert_eq!(expected_witnesses(0, 300), 32);
        assert_eq!(expected_witnesses(0, 5), 5);
        assert_eq!(expected_witnesses(3, 2), 2);
        assert_eq!(checkpointer_count(10, 0), 0);
        assert_eq!(checkpointer_count(0, 50), 0);
        assert_eq!(checkpointer_count(3, 1), 1);
        assert_eq!(checkpointer_count(10, 30), 3);
        assert_eq!(checkpointer_count(10, 31), 4);
        assert_eq!(verifier_count(9, 50), 4);
        let r = sample_round();
        // participants 0b1011_0111_1101: indices 0,2,3,4,5,6,8,9,11
        let ords: Vec<Option<usize>> = (0..12).map(|i| ordinal(&r, i)).collect();
        assert_eq!(
            ords,
            [
                Some(0),
                None,
                Some(1),
                Some(2),
                Some(3),
                Some(4),
                Some(5),
                None,
                Some(6),
                Some(7),
                None,
                Some(8)
            ]
        );
        assert_eq!(ordinal(&r, 255), None);
        assert_eq!(ordinal(&r, 256), None);
    }
}
