//! `tick`: anyone advances the state machine by the clock; and the tick that follows every
//! client operation.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorError, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use crate::error::LogicResult;

pub fn tick(s: &mut CoordinatorState, now: u64) -> LogicResult {
    Ok(core_sm::tick(s, now)?)
}

/// The rule shared with the Python server (`CoordinatorServer.apply_op`): after a client
/// operation (`join_run`, `withdraw`, `warmup_witness`, `witness`, `health_check`,
/// `checkpoint`, `synced`, `resync`) succeeds, the core is ticked at the same time; a tick that fails (only
/// `Halted` can: the operation already accepted the time) is ignored and writes nothing, and
/// the operation stands.
pub(crate) fn then_tick(
    s: &mut CoordinatorState,
    now: u64,
    op: core::result::Result<(), CoordinatorError>,
) -> LogicResult {
    op?;
    // A failed tick leaves the state untouched; the operation itself stands.
    let _ = core_sm::tick(s, now);
    Ok(())
}

pub fn handler(ctx: Context<PermissionlessCoordinatorAccounts>) -> Result<()> {
    ctx.accounts.apply(tick)
}
