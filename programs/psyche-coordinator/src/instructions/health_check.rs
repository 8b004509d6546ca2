//! `health_check`: a client names the peers it found unhealthy.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

pub fn health_check(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    targets: &[u16],
) -> LogicResult {
    let op = core_sm::health_check(s, now, signer.as_ref(), index, targets);
    then_tick(s, now, op)
}

pub fn handler(
    ctx: Context<PermissionlessCoordinatorAccounts>,
    index: u32,
    targets: Vec<u16>,
) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| health_check(s, now, &user, index, &targets))
}
