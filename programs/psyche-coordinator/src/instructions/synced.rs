//! `synced`: a syncing client replayed the applied results up to the agreed parameters.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

pub fn synced(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    step: u32,
    param_hash: &[u8; 32],
) -> LogicResult {
    let op = core_sm::synced(s, now, signer.as_ref(), index, step, param_hash);
    then_tick(s, now, op)
}

pub fn handler(
    ctx: Context<PermissionlessCoordinatorAccounts>,
    index: u32,
    step: u32,
    param_hash: [u8; 32],
) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| synced(s, now, &user, index, step, &param_hash))
}
