//! `withdraw`: the signer leaves the run.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

pub fn withdraw(s: &mut CoordinatorState, now: u64, signer: &Pubkey) -> LogicResult {
    let op = core_sm::withdraw(s, now, signer.as_ref());
    then_tick(s, now, op)
}

pub fn handler(ctx: Context<PermissionlessCoordinatorAccounts>) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts.apply(|s, now| withdraw(s, now, &user))
}
