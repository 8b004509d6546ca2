//! A contributor identity's points in one run, and the node keys that may act for it.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{Points, MAX_DELEGATES};

/// One contributor identity's ledger entry in one run (`points.Points`) and its delegates.
/// PDA `["contributor", coordinator_instance, identity]`: `join_run` creates it for a signer
/// joining as itself, `set_delegates` for an identity listing its node keys; `settle_points`
/// credits it with what a client slot earned.
#[account]
#[derive(InitSpace, Debug, PartialEq, Eq)]
pub struct Contributor {
    pub bump: u8,
    pub coordinator_instance: Pubkey,
    pub identity: Pubkey,
    /// Node keys that may `join_run` as this identity (at most 8), set by the identity.
    #[max_len(8)]
    pub delegates: Vec<Pubkey>,
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

const _: () = assert!(MAX_DELEGATES == 8);

impl Contributor {
    /// Account size including the discriminator.
    pub const SPACE: usize = 8 + Self::INIT_SPACE;
    /// Where `identity` sits in the account data (discriminator included): a `memcmp` filter
    /// of `getProgramAccounts`.
    pub const IDENTITY_OFFSET: usize = 8 + 1 + 32;
    /// Where `coordinator_instance` sits: the filter that lists one run's contributors.
    pub const INSTANCE_OFFSET: usize = 8 + 1;

    /// Fills in a contributor account that was just created (all zero).
    pub fn init_if_new(&mut self, bump: u8, instance: Pubkey, identity: Pubkey) {
        if self.identity == Pubkey::default() && self.coordinator_instance == Pubkey::default() {
            self.bump = bump;
            self.coordinator_instance = instance;
            self.identity = identity;
        }
    }

    /// The core's ledger entry.
    pub fn points(&self) -> Points {
        Points {
            identity: self.identity.to_bytes(),
            presence_rounds: self.presence_rounds,
            sequences: self.sequences,
            tokens: self.tokens,
            token_carry: self.token_carry,
            presence_points: self.presence_points,
            compute_points: self.compute_points,
        }
    }

    /// Stores the core's ledger entry (same identity).
    pub fn set_points(&mut self, p: &Points) {
        self.presence_rounds = p.presence_rounds;
        self.sequences = p.sequences;
        self.tokens = p.tokens;
        self.token_carry = p.token_carry;
        self.presence_points = p.presence_points;
        self.compute_points = p.compute_points;
    }
}
