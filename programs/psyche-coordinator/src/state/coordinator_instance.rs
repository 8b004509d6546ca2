//! The run's identity and authorities.

use anchor_lang::prelude::*;
use psyche_coordinator_core::RUN_ID_LEN;

#[cfg(doc)]
use crate::JoinAuthorization;

/// The run's identity and authorities (a small borsh account; PDA `["coordinator", run_id]`).
#[account]
#[derive(InitSpace, Debug, PartialEq, Eq)]
pub struct CoordinatorInstance {
    pub bump: u8,
    /// May `update`, `set_paused` and `free_coordinator`.
    pub main_authority: Pubkey,
    /// May `authorize_joiner` and `revoke_joiner`.
    pub join_authority: Pubkey,
    /// Anyone may `join_run`; otherwise a [`JoinAuthorization`] for the signer is required.
    pub permissionless: bool,
    /// The [`CoordinatorAccount`](crate::CoordinatorAccount) holding the state.
    pub coordinator_account: Pubkey,
    /// 1 to 32 bytes.
    #[max_len(32)]
    pub run_id: String,
}

impl CoordinatorInstance {
    /// Account size including the discriminator.
    pub const SPACE: usize = 8 + Self::INIT_SPACE;
}

/// The seed for a run id: its first (at most 32) bytes. A longer id is then refused by the
/// handler with `RunIdInvalidLength` (a seed over 32 bytes would make the PDA derivation
/// fail before the handler runs).
pub fn run_id_seed(run_id: &str) -> &[u8] {
    let raw = run_id.as_bytes();
    &raw[..raw.len().min(RUN_ID_LEN)]
}
