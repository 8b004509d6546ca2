//! `warmup_witness`: a client has the model loaded.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

pub fn warmup_witness(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
) -> LogicResult {
    let op = core_sm::warmup_witness(s, now, signer.as_ref(), index);
    then_tick(s, now, op)
}

pub fn handler(ctx: Context<PermissionlessCoordinatorAccounts>, index: u32) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| warmup_witness(s, now, &user, index))
}
