//! Contributor points (`points.py`): the ledger entry of one identity, and how a slot's points
//! credit it.
//!
//! The coordinator state holds, per client slot, the rounds it was present and the sequences it
//! trained that a witness quorum vouched for (`credit_round` at every round's end). Those
//! counters are bounded (one per slot); the totals per contributor identity are not, so they
//! live outside the state (a per-contributor account on chain). `settle` moves a slot's counters
//! out; [`credit`] adds them to the identity's entry at the run's rates. Both run in one
//! instruction (`settle_points`), so nothing is counted twice or lost.
//!
//! Every figure is a u64 that saturates instead of wrapping, exactly as `points.py` clamps.

use crate::config::RunConfig;
use crate::constants::KEY_LEN;
use crate::error::CoordinatorError;
use crate::state::CoordinatorState;

/// What one slot's settlement moves: the points its identity earned through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credit {
    pub identity: [u8; KEY_LEN],
    /// Rounds present.
    pub presence: u64,
    /// Sequences trained and vouched for.
    pub sequences: u64,
}

/// One contributor identity's points in one run, summed over all its node keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Points {
    pub identity: [u8; KEY_LEN],
    /// Rounds present, any phase.
    pub presence_rounds: u64,
    /// Sequences trained and vouched for by a witness quorum.
    pub sequences: u64,
    /// Those sequences' tokens (`max_seq_len` each, at the time).
    pub tokens: u64,
    /// Tokens toward the next compute point (< `tokens_per_compute_point`).
    pub token_carry: u64,
    pub presence_points: u64,
    pub compute_points: u64,
}

impl Points {
    /// A new identity's empty entry.
    pub const fn new(identity: [u8; KEY_LEN]) -> Self {
        Points {
            identity,
            presence_rounds: 0,
            sequences: 0,
            tokens: 0,
            token_carry: 0,
            presence_points: 0,
            compute_points: 0,
        }
    }

    /// Presence and compute points together (saturating).
    pub fn total(&self) -> u64 {
        self.presence_points.saturating_add(self.compute_points)
    }
}

/// The credit `settle(index)` moves (read it before applying the settle); `InvalidClientIndex`
/// for an index past the epoch's clients.
pub fn pending_credit(s: &CoordinatorState, index: u32) -> Result<Credit, CoordinatorError> {
    let c = s
        .clients()
        .get(index as usize)
        .ok_or(CoordinatorError::InvalidClientIndex)?;
    Ok(Credit {
        identity: c.identity,
        presence: c.presence,
        sequences: c.sequences,
    })
}

/// `entry` with a settled credit added at the run's rates (start from [`Points::new`] for a new
/// identity). Presence points come first, then compute points; together they stop at
/// `points_cap` (0: no cap). The counts (rounds, sequences, tokens) always grow.
/// `InvalidOperation` when the credit is for another identity.
pub fn credit(entry: &Points, c: &Credit, config: &RunConfig) -> Result<Points, CoordinatorError> {
    if entry.identity != c.identity {
        return Err(CoordinatorError::InvalidOperation);
    }
    // validate() keeps it >= 1; a zero (never valid) divides as 1 instead of panicking
    let per_point = config.tokens_per_compute_point.max(1);
    let tokens = c.sequences.saturating_mul(config.max_seq_len as u64);
    let room = if config.points_cap == 0 {
        u64::MAX
    } else {
        config.points_cap.saturating_sub(entry.total())
    };
    let presence = c
        .presence
        .saturating_mul(config.presence_points as u64)
        .min(room);
    let carry = entry.token_carry.saturating_add(tokens);
    let compute = (carry / per_point).min(room - presence);
    Ok(Points {
        identity: entry.identity,
        presence_rounds: entry.presence_rounds.saturating_add(c.presence),
        sequences: entry.sequences.saturating_add(c.sequences),
        tokens: entry.tokens.saturating_add(tokens),
        token_carry: carry % per_point,
        presence_points: entry.presence_points.saturating_add(presence),
        compute_points: entry.compute_points.saturating_add(compute),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(presence_points: u32, per_point: u64, cap: u64, seq: u32) -> RunConfig {
        let mut c = RunConfig::DEFAULT;
        c.presence_points = presence_points;
        c.tokens_per_compute_point = per_point;
        c.points_cap = cap;
        c.max_seq_len = seq;
        c
    }

    #[test]
    fn credit_rates_carry_and_cap() {
        let id = [3u8; 32];
        let e = Points::new(id);
        let c = Credit {
            identity: id,
            presence: 5,
            sequences: 3,
        };
        // 3 sequences of 10 tokens = 30 tokens; 7 per point: 4 points, carry 2
        let got = credit(&e, &c, &cfg(2, 7, 0, 10)).unwrap();
        assert_eq!(
            got,
            Points {
                identity: id,
                presence_rounds: 5,
                sequences: 3,
                tokens: 30,
                token_carry: 2,
                presence_points: 10,
                compute_points: 4,
            }
        );
        // the carry counts toward the next point
        let again = credit(&got, &c, &cfg(2, 7, 0, 10)).unwrap();
        assert_eq!((again.compute_points, again.token_carry), (8, 4));
        // a cap of 12: presence first (10), then compute up to the cap (2)
        let capped = credit(&e, &c, &cfg(2, 7, 12, 10)).unwrap();
        assert_eq!((capped.presence_points, capped.compute_points), (10, 2));
        assert_eq!(capped.tokens, 30);
        let full = credit(&capped, &c, &cfg(2, 7, 12, 10)).unwrap();
        assert_eq!(full.total(), 12);
        assert_eq!(full.presence_rounds, 10);
        // saturating arithmetic
        let big = Credit {
            identity: id,
            presence: u64::MAX,
            sequences: u64::MAX,
        };
        let sat = credit(&e, &big, &cfg(u32::MAX, 1, 0, u32::MAX)).unwrap();
        assert_eq!(sat.presence_points, u64::MAX);
        assert_eq!(sat.compute_points, 0); // no room left past the presence points
        assert_eq!(sat.tokens, u64::MAX);
        assert_eq!(
            credit(&Points::new([4; 32]), &c, &RunConfig::DEFAULT),
            Err(CoordinatorError::InvalidOperation)
        );
    }
}
