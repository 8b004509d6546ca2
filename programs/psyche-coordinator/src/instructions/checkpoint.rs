//! `checkpoint`: an elected checkpointer records a stored snapshot of the agreed parameters.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

#[allow(clippy::too_many_arguments)]
pub fn checkpoint(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    repo: &str,
    revision: &str,
    step: u32,
    param_hash: &[u8; 32],
) -> LogicResult {
    let op = core_sm::checkpoint(
        s,
        now,
        signer.as_ref(),
        index,
        repo.as_bytes(),
        revision.as_bytes(),
        step,
        param_hash,
    );
    then_tick(s, now, op)
}

pub fn handler(
    ctx: Context<PermissionlessCoordinatorAccounts>,
    index: u32,
    repo: String,
    revision: String,
    step: u32,
    param_hash: [u8; 32],
) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| checkpoint(s, now, &user, index, &repo, &revision, step, &param_hash))
}
