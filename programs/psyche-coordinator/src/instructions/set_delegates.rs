//! `set_delegates`: a contributor identity lists the node keys that may join as it.
//!
//! `large_stack_frames` is allowed for the code Anchor generates here (see `lib.rs`): the
//! `init_if_needed` constraint sums past 4096 bytes of MIR locals. The hand-written items
//! switch the lint back on.

use anchor_lang::prelude::*;
use psyche_coordinator_core::MAX_DELEGATES;

use crate::constants::CONTRIBUTOR_SEED;
use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{Contributor, CoordinatorInstance};

#[derive(Accounts)]
pub struct SetDelegates<'info> {
    #[account(mut)]
    pub payer: Signer<'info>,
    pub identity: Signer<'info>,
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        init_if_needed,
        payer = payer,
        space = Contributor::SPACE,
        seeds = [CONTRIBUTOR_SEED, coordinator_instance.key().as_ref(), identity.key().as_ref()],
        bump,
    )]
    pub contributor: Account<'info, Contributor>,
    pub system_program: Program<'info, System>,
}

/// At most [`MAX_DELEGATES`] delegates (`TooManyDelegates`).
#[warn(clippy::large_stack_frames)]
pub fn check_delegates(delegates: &[Pubkey]) -> LogicResult {
    if delegates.len() > MAX_DELEGATES {
        return Err(E::TooManyDelegates);
    }
    Ok(())
}

#[warn(clippy::large_stack_frames)]
pub fn handler(ctx: Context<SetDelegates>, delegates: Vec<Pubkey>) -> Result<()> {
    check_delegates(&delegates)?;
    let instance = ctx.accounts.coordinator_instance.key();
    let identity = ctx.accounts.identity.key();
    let contributor = &mut ctx.accounts.contributor;
    contributor.init_if_new(ctx.bumps.contributor, instance, identity);
    contributor.delegates = delegates;
    Ok(())
}
