//! `settle_points`: anyone moves the points a client slot holds into its identity's
//! contributor account, in one instruction (the core's `settle` and `points::credit`), then
//! ticks (a new epoch starts once every slot is settled).
//!
//! `large_stack_frames` is allowed for the code Anchor generates here (see `lib.rs`): the
//! account list's `try_accounts` sums past 4096 bytes of MIR locals. The hand-written items
//! switch the lint back on.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState, Credit, RunConfig};

use super::run_accounts::RunAccounts;
use super::tick::then_tick;
use crate::constants::CONTRIBUTOR_SEED;
use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{Contributor, CoordinatorAccount, CoordinatorInstance};

#[derive(Accounts)]
#[instruction(index: u32, identity: Pubkey)]
pub struct SettlePoints<'info> {
    pub user: Signer<'info>,
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount,
    )]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
    /// The slot's identity's contributor account (it exists: `join_run` or `set_delegates`
    /// made it before the identity could hold a slot).
    #[account(
        mut,
        seeds = [CONTRIBUTOR_SEED, coordinator_instance.key().as_ref(), identity.as_ref()],
        bump = contributor.bump,
    )]
    pub contributor: Account<'info, Contributor>,
}

#[warn(clippy::large_stack_frames)]
impl<'info> RunAccounts<'info> for SettlePoints<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount> {
        &self.coordinator_account
    }
}

/// The core's `settle(index)` for the slot of `identity` (`InvalidClientIndex`, then
/// `WrongContributor` when the slot's identity is another, then `NothingToSettle`), then
/// tick. Returns what moved and the config to credit it at.
#[warn(clippy::large_stack_frames)]
pub fn settle_points(
    s: &mut CoordinatorState,
    now: u64,
    index: u32,
    identity: &Pubkey,
) -> LogicResult<(Credit, RunConfig)> {
    let moved = core_sm::pending_credit(s, index)?;
    if moved.identity != identity.to_bytes() {
        return Err(E::WrongContributor);
    }
    let config = s.config;
    let op = core_sm::settle(s, now, index);
    then_tick(s, now, op)?;
    Ok((moved, config))
}

/// `points::credit` on the contributor account.
#[warn(clippy::large_stack_frames)]
pub fn credit_contributor(
    contributor: &mut Contributor,
    moved: &Credit,
    config: &RunConfig,
) -> LogicResult {
    let entry = core_sm::credit(&contributor.points(), moved, config)?;
    contributor.set_points(&entry);
    Ok(())
}

#[warn(clippy::large_stack_frames)]
pub fn handler(ctx: Context<SettlePoints>, index: u32, identity: Pubkey) -> Result<()> {
    let (moved, config) = ctx
        .accounts
        .apply(|s, now| settle_points(s, now, index, &identity))?;
    Ok(credit_contributor(
        &mut ctx.accounts.contributor,
        &moved,
        &config,
    )?)
}
