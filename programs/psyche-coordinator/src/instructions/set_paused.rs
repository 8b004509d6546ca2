//! `set_paused`: the main authority pauses or resumes the run.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{OwnerCoordinatorAccounts, RunAccounts};
use crate::error::LogicResult;

/// `true` → the core's `pause`, `false` → `resume` (the only way out of Uninitialized).
/// No tick follows (resume enters WaitingForMembers, which a tick at the same second cannot
/// leave).
pub fn set_paused(s: &mut CoordinatorState, now: u64, paused: bool) -> LogicResult {
    if paused {
        Ok(core_sm::pause(s, now)?)
    } else {
        Ok(core_sm::resume(s, now)?)
    }
}

pub fn handler(ctx: Context<OwnerCoordinatorAccounts>, paused: bool) -> Result<()> {
    ctx.accounts.apply(|s, now| set_paused(s, now, paused))
}
