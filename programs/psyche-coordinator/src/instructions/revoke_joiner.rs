//! `revoke_joiner`: the join authority removes a grantee's authorization.

use anchor_lang::prelude::*;

use crate::error::CoordinatorProgramError as E;
use crate::state::{CoordinatorInstance, JoinAuthorization};

#[derive(Accounts)]
pub struct RevokeJoiner<'info> {
    pub join_authority: Signer<'info>,
    /// CHECK: any writable account; receives the authorization's lamports.
    #[account(mut)]
    pub spill: UncheckedAccount<'info>,
    #[account(
        constraint = coordinator_instance.join_authority == join_authority.key() @ E::NotJoinAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        close = spill,
        constraint = authorization.coordinator_instance == coordinator_instance.key() @ E::AuthorizationMismatch,
    )]
    pub authorization: Account<'info, JoinAuthorization>,
}

/// Nothing to do beyond the account checks: Anchor's `close` moves the authorization's
/// lamports to `spill`.
pub fn handler(_ctx: Context<RevokeJoiner>) -> Result<()> {
    Ok(())
}
