//! Psyche coordinator core: the pure state machine of `psyche_coordinator_core` (Python) in Rust.
//!
//! The state *is* the account layout: [`CoordinatorState`] is a `#[repr(C)]` plain-old-data
//! struct of exactly [`STATE_SIZE`] bytes whose bytes are the canonical bytes of
//! `psyche_coordinator_core/canonical.py`, so the state hash is SHA-256 of the struct's memory.
//! Operations mutate the state in place (`&mut CoordinatorState`, e.g. account data cast with
//! `bytemuck`), take the time as an argument and return `Result<(), CoordinatorError>`.
//!
//! Written for an SBF (Solana) program: `no_std`, no allocation, no floats, no `u128`, no maps,
//! no clock, every loop bounded by a protocol constant, and no large value on the stack.

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

#[cfg(target_endian = "big")]
compile_error!("the canonical layout is little-endian; big-endian targets are not supported");

pub mod assignment;
pub mod bloom;
pub mod committee;
pub mod config;
pub mod constants;
pub mod coordinator;
pub mod error;
pub mod points;
pub mod shuffle;
pub mod state;

pub use assignment::{
    assign_batches, batch_for, batch_mask, batch_size, for_each_batch, in_verification_sample,
    round_batch_size, verification_for, BatchId,
};
pub use bloom::{bloom_add, bloom_contains, bloom_contains_signer, check_bloom_bytes};
pub use committee::{expected_witnesses, param_quorum, witness_quorum};
pub use config::RunConfig;
pub use constants::*;
pub use coordinator::{
    checkpoint, evidence, health_check, is_healthy, join, new_run, pause, resume, resync, round_seed, settle,
    synced, tick, tick_deadline, trainer_score, update, warmup_witness, withdraw, witness,
    CheckpointArgs,
};
pub use error::CoordinatorError;
pub use points::{credit, pending_credit, Credit, Points};
pub use state::{
    state_hash, CheckpointKind, Client, ClientPhase, ClientState, CoordinatorState, Round,
    RunState, StateHeader, Witness,
};

#[cfg(test)]
pub(crate) mod testutil {
    use crate::state::Round;
    use bytemuck::Zeroable;

    /// Python: Round(height=3, data_index=40, random_seed=0x0123456789abcdef,
    /// participants=0b1011_0111_1101), i.e. clients 0,2,3,4,5,6,8,9,11.
    pub fn sample_round() -> Box<Round> {
        let mut r = Box::new(Round::zeroed());
        r.height = 3;
        r.data_index = 40;
        r.random_seed = 0x0123456789abcdef;
        let bits: u32 = 0b1011_0111_1101;
        r.participants[0] = bits as u8;
        r.participants[1] = (bits >> 8) as u8;
        r.participant_count = bits.count_ones() as u16;
        r
    }
}
