//! What each instruction does to the state, without Anchor's account machinery: plain
//! functions over `&mut CoordinatorState` (the account data), the time and the signer, so they
//! can be tested on a boxed state and called the same way by the handlers.
//!
//! Rule shared with the Python server (`CoordinatorServer.apply_op`): after a client operation
//! (`join_run`, `withdraw`, `warmup_witness`, `witness`, `health_check`, `checkpoint`) succeeds,
//! the core is ticked at the same time; a tick that fails (only `Halted` can: the operation
//! already accepted the time) is ignored and writes nothing, and the operation stands.

use anchor_lang::prelude::Pubkey;
use anchor_lang::Discriminator;
use psyche_coordinator_core::{
    self as core_sm, CheckpointArgs, CoordinatorError, CoordinatorState, RunConfig, RUN_ID_LEN,
};

use crate::coordinator_account::CoordinatorAccount;
use crate::error::CoordinatorProgramError as E;
use crate::state::{CheckpointParams, CoordinatorInstance, JoinAuthorization, RunConfigParams};

pub type Result<T = ()> = core::result::Result<T, E>;

/// The Clock's `unix_timestamp` as the core's `now`: a negative time is refused as
/// `InvalidOperation`, as Python's `apply` does ("time must be a non-negative integer").
pub fn now_from_unix_timestamp(unix_timestamp: i64) -> Result<u64> {
    u64::try_from(unix_timestamp).map_err(|_| E::InvalidOperation)
}

/// 1 to 32 bytes, else `RunIdInvalidLength` (the core then also requires NUL-free UTF-8:
/// `InvalidRunId`).
pub fn check_run_id_length(run_id: &str) -> Result {
    if run_id.is_empty() || run_id.len() > RUN_ID_LEN {
        return Err(E::RunIdInvalidLength);
    }
    Ok(())
}

/// `init_coordinator` on the pre-allocated account data (discriminator included): exact size
/// (`AccountIncorrectSize`), never initialized (`AccountAlreadyInitialized`), then the core's
/// `new_run` (Uninitialized, dummy checkpoint) and finally the discriminator.
pub fn init_account_data(
    data: &mut [u8],
    run_id: &str,
    config: &RunConfig,
    run_seed: u64,
) -> Result {
    check_run_id_length(run_id)?;
    if data.len() != CoordinatorAccount::SPACE {
        return Err(E::AccountIncorrectSize);
    }
    let (disc, body) = data.split_at_mut(8);
    if disc.iter().any(|&b| b != 0) {
        return Err(E::AccountAlreadyInitialized);
    }
    let state: &mut CoordinatorState =
        bytemuck::try_from_bytes_mut(body).map_err(|_| E::AccountMisaligned)?;
    core_sm::new_run(
        state,
        run_id.as_bytes(),
        config,
        run_seed,
        &CheckpointArgs::DUMMY,
    )?;
    disc.copy_from_slice(CoordinatorAccount::DISCRIMINATOR);
    Ok(())
}

/// Apply-then-tick (see the module docs).
fn then_tick(
    s: &mut CoordinatorState,
    now: u64,
    op: core::result::Result<(), CoordinatorError>,
) -> Result {
    op?;
    // A failed tick leaves the state untouched; the operation itself stands.
    let _ = core_sm::tick(s, now);
    Ok(())
}

pub fn tick(s: &mut CoordinatorState, now: u64) -> Result {
    Ok(core_sm::tick(s, now)?)
}

pub fn join_run(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    p2p_identity: &[u8; 32],
) -> Result {
    let op = core_sm::join(s, now, signer.as_ref(), p2p_identity);
    then_tick(s, now, op)
}

pub fn withdraw(s: &mut CoordinatorState, now: u64, signer: &Pubkey) -> Result {
    let op = core_sm::withdraw(s, now, signer.as_ref());
    then_tick(s, now, op)
}

pub fn warmup_witness(s: &mut CoordinatorState, now: u64, signer: &Pubkey, index: u32) -> Result {
    let op = core_sm::warmup_witness(s, now, signer.as_ref(), index);
    then_tick(s, now, op)
}

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
) -> Result {
    let op = core_sm::witness(
        s,
        now,
        signer.as_ref(),
        index,
        step,
        participant_bloom,
        broadcast_bloom,
        broadcast_merkle,
    );
    then_tick(s, now, op)
}

pub fn health_check(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    targets: &[u16],
) -> Result {
    let op = core_sm::health_check(s, now, signer.as_ref(), index, targets);
    then_tick(s, now, op)
}

pub fn checkpoint(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    index: u32,
    repo: &str,
    revision: &str,
) -> Result {
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

/// `true` → the core's `pause`, `false` → `resume` (the only way out of Uninitialized).
/// No tick follows (resume enters WaitingForMembers, which a tick at the same second cannot
/// leave).
pub fn set_paused(s: &mut CoordinatorState, now: u64, paused: bool) -> Result {
    if paused {
        Ok(core_sm::pause(s, now)?)
    } else {
        Ok(core_sm::resume(s, now)?)
    }
}

pub fn update(
    s: &mut CoordinatorState,
    now: u64,
    config: Option<&RunConfigParams>,
    checkpoint: Option<&CheckpointParams>,
) -> Result {
    let config = config.map(RunConfigParams::to_core);
    let checkpoint = checkpoint.map(CheckpointParams::as_core);
    Ok(core_sm::update(
        s,
        now,
        config.as_ref(),
        checkpoint.as_ref(),
    )?)
}

/// `free_coordinator` only closes a halted run (Uninitialized, Paused or Finished).
pub fn check_free(s: &CoordinatorState) -> Result {
    if !s.run_state().halted() {
        return Err(E::CloseNotHalted);
    }
    Ok(())
}

/// `join_run`'s permission: a permissionless run admits anyone; otherwise the signer needs a
/// `JoinAuthorization` of this run granted to it (`NotAuthorized` without one,
/// `AuthorizationMismatch` for another run's, `SignerMismatch` for another grantee's).
/// On a permissionless run a passed authorization is ignored.
pub fn check_join_permission(
    instance: &CoordinatorInstance,
    instance_key: &Pubkey,
    signer: &Pubkey,
    authorization: Option<&JoinAuthorization>,
) -> Result {
    if instance.permissionless {
        return Ok(());
    }
    let auth = authorization.ok_or(E::NotAuthorized)?;
    if &auth.coordinator_instance != instance_key {
        return Err(E::AuthorizationMismatch);
    }
    if &auth.grantee != signer {
        return Err(E::SignerMismatch);
    }
    Ok(())
}
