//! `witness`: an elected witness reports what it saw of the round.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::{PermissionlessCoordinatorAccounts, RunAccounts};
use super::tick::then_tick;
use crate::error::LogicResult;

#[allow(clippy::too_many_arguments)]
pub fn witness(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    step: u32,
    participant_bloom: &[u8],
    broadcast_bloom: &[u8],
    broadcast_merkle: &[u8; 32],
    param_hash: &[u8; 32],
) -> LogicResult {
    let op = core_sm::witness(
        s,
        now,
        signer.as_ref(),
        index,
        step,
        participant_bloom,
        broadcast_bloom,
        broadcast_merkle,
        param_hash,
    );
    then_tick(s, now, op)
}

pub fn handler(
    ctx: Context<PermissionlessCoordinatorAccounts>,
    index: u32,
    step: u32,
    participant_bloom: Vec<u8>,
    broadcast_bloom: Vec<u8>,
    broadcast_merkle: [u8; 32],
    param_hash: [u8; 32],
) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts.apply(|s, now| {
        witness(
            s,
            now,
            &user,
            index,
            step,
            &participant_bloom,
            &broadcast_bloom,
            &broadcast_merkle,
            &param_hash,
        )
    })
}
