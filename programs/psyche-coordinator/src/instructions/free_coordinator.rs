//! `free_coordinator`: the main authority closes a halted run.

use anchor_lang::prelude::*;
use psyche_coordinator_core::CoordinatorState;

use super::run_accounts::RunAccounts;
use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{CoordinatorAccount, CoordinatorInstance};

#[derive(Accounts)]
pub struct FreeCoordinator<'info> {
    pub authority: Signer<'info>,
    /// CHECK: any writable account; receives the lamports of both closed accounts.
    #[account(mut)]
    pub spill: UncheckedAccount<'info>,
    #[account(
        mut,
        close = spill,
        constraint = coordinator_instance.main_authority == authority.key() @ E::NotAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        close = spill,
        address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount,
    )]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
}

impl<'info> RunAccounts<'info> for FreeCoordinator<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount> {
        &self.coordinator_account
    }
}

/// `free_coordinator` only closes a halted run (Uninitialized, Paused or Finished).
pub fn check_free(s: &CoordinatorState) -> LogicResult {
    if !s.run_state().halted() {
        return Err(E::CloseNotHalted);
    }
    Ok(())
}

/// Reads the state without the Clock (freeing takes no time); Anchor's `close` constraints
/// then move both accounts' lamports to `spill`.
pub fn handler(ctx: Context<FreeCoordinator>) -> Result<()> {
    let account = ctx.accounts.sized_coordinator_account()?.load()?;
    check_free(account.state())?;
    Ok(())
}
