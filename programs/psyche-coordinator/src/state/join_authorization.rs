//! A grantee's permission to join a permissioned run.

use anchor_lang::prelude::*;

/// Lets `grantee` join the run of `coordinator_instance` when it is not permissionless.
/// PDA `["authorization", coordinator_instance, grantee]`, created by the join authority.
#[account]
#[derive(InitSpace, Debug, PartialEq, Eq)]
pub struct JoinAuthorization {
    pub bump: u8,
    pub coordinator_instance: Pubkey,
    pub grantee: Pubkey,
}

impl JoinAuthorization {
    pub const SPACE: usize = 8 + Self::INIT_SPACE;
}
