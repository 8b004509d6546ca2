//! `authorize_joiner`: the join authority lets a grantee join a permissioned run.
//!
//! `large_stack_frames` is allowed for the code Anchor generates here (see `lib.rs`): the
//! `init` constraint sums past 4096 bytes of MIR locals, its real frame is at most 1,096
//! bytes. The handler switches the lint back on.

use anchor_lang::prelude::*;

use crate::constants::AUTHORIZATION_SEED;
use crate::error::CoordinatorProgramError as E;
use crate::state::{CoordinatorInstance, JoinAuthorization};

#[derive(Accounts)]
#[instruction(grantee: Pubkey)]
pub struct AuthorizeJoiner<'info> {
    #[account(mut)]
    pub payer: Signer<'info>,
    pub join_authority: Signer<'info>,
    #[account(
        constraint = coordinator_instance.join_authority == join_authority.key() @ E::NotJoinAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        init,
        payer = payer,
        space = JoinAuthorization::SPACE,
        seeds = [AUTHORIZATION_SEED, coordinator_instance.key().as_ref(), grantee.as_ref()],
        bump,
    )]
    pub authorization: Account<'info, JoinAuthorization>,
    pub system_program: Program<'info, System>,
}

#[warn(clippy::large_stack_frames)]
pub fn handler(ctx: Context<AuthorizeJoiner>, grantee: Pubkey) -> Result<()> {
    let authorization = &mut ctx.accounts.authorization;
    authorization.bump = ctx.bumps.authorization;
    authorization.coordinator_instance = ctx.accounts.coordinator_instance.key();
    authorization.grantee = grantee;
    Ok(())
}
