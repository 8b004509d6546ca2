//! `free_run_spec`: the main authority closes a halted run's spec account, returning its rent.
//! `close-run` sends it before `free_coordinator`, which closes the instance it checks against.

use anchor_lang::prelude::*;

use super::free_coordinator::check_free;
use super::run_accounts::RunAccounts;
use crate::constants::RUN_SPEC_SEED;
use crate::error::CoordinatorProgramError as E;
use crate::state::{CoordinatorAccount, CoordinatorInstance, RunSpec};

#[derive(Accounts)]
pub struct FreeRunSpec<'info> {
    pub authority: Signer<'info>,
    /// CHECK: any writable account; receives the spec account's lamports.
    #[account(mut)]
    pub spill: UncheckedAccount<'info>,
    #[account(
        constraint = coordinator_instance.main_authority == authority.key() @ E::NotAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount)]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
    #[account(
        mut,
        close = spill,
        seeds = [RUN_SPEC_SEED, coordinator_instance.key().as_ref()],
        bump = run_spec.bump,
    )]
    pub run_spec: Account<'info, RunSpec>,
}

impl<'info> RunAccounts<'info> for FreeRunSpec<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount> {
        &self.coordinator_account
    }
}

/// Like `free_coordinator`, only while the run is halted (`CloseNotHalted`): clients that join
/// read the spec. Anchor's `close` then moves its lamports to `spill`.
pub fn handler(ctx: Context<FreeRunSpec>) -> Result<()> {
    let account = ctx.accounts.sized_coordinator_account()?.load()?;
    check_free(account.state())?;
    Ok(())
}
