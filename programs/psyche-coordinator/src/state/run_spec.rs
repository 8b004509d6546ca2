//! The run's spec: what its clients train, as canonical JSON bytes.

use anchor_lang::prelude::*;

use crate::constants::RUN_SPEC_MAX_LEN;

/// The run spec's bytes (the canonical JSON of `psyche_client/training/spec.py`: model,
/// optimizer, data, snapshot store, relays), written by the main authority in chunks
/// (`set_run_spec`). PDA `["run_spec", coordinator_instance]`. The program does not read them:
/// the coordinator state's `spec_hash` (set with `update`) is what clients check them against,
/// so bytes still being written, or changed without a new hash, are refused by every client.
#[account]
#[derive(InitSpace, Debug, PartialEq, Eq)]
pub struct RunSpec {
    pub bump: u8,
    pub coordinator_instance: Pubkey,
    #[max_len(RUN_SPEC_MAX_LEN)]
    pub bytes: Vec<u8>,
}

impl RunSpec {
    /// Account size including the discriminator.
    pub const SPACE: usize = 8 + Self::INIT_SPACE;
}

// created by the program (`init_if_needed`): a CPI may allocate at most 10 KiB
const _: () = assert!(RunSpec::SPACE <= 10_240);
