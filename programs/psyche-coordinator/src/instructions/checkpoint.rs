//! `checkpoint`: an elected checkpointer reports the uploaded model.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

pub fn checkpoint(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    repo: &str,
    revision: &str,
) -> LogicResult {
    let op = core_sm::checkpoint(
        s,
        now,
        signer.as_ref(),
        index,
        repo.as_bytes(),
        revision.as_bytes(),
    );
    then_tick(s, now, op)
}

pub fn handler(
    ctx: Context<PermissionlessCoordinatorAccounts>,
    index: u32,
    repo: String,
    revision: String,
) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| checkpoint(s, now, &user, index, &repo, &revision))
}
