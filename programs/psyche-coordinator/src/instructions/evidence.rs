//! `evidence`: an elected verifier says a trainer's result for a step is bad.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

pub fn evidence(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    step: u32,
    target: u16,
) -> LogicResult {
    let op = core_sm::evidence(s, now, signer.as_ref(), index, step, target);
    then_tick(s, now, op)
}

pub fn handler(
    ctx: Context<PermissionlessCoordinatorAccounts>,
    index: u32,
    step: u32,
    target: u16,
) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| evidence(s, now, &user, index, step, target))
}
