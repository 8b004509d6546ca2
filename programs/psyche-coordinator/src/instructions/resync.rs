//! `resync`: a client that lags goes back to syncing.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

pub fn resync(s: &mut CoordinatorState, now: u64, signer: &Pubkey, index: u32) -> LogicResult {
    let op = core_sm::resync(s, now, signer.as_ref(), index);
    then_tick(s, now, op)
}

pub fn handler(ctx: Context<PermissionlessCoordinatorAccounts>, index: u32) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts.apply(|s, now| resync(s, now, &user, index))
}
