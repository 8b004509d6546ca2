//! `set_run_spec`: the main authority writes a chunk of the run spec's bytes.
//!
//! `large_stack_frames` is allowed for the code Anchor generates here (see `lib.rs`): the
//! `init_if_needed` constraint sums past 4096 bytes of MIR locals. The hand-written items
//! switch the lint back on.

use anchor_lang::prelude::*;

use crate::constants::{RUN_SPEC_MAX_LEN, RUN_SPEC_SEED};
use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{CoordinatorInstance, RunSpec};

#[derive(Accounts)]
pub struct SetRunSpec<'info> {
    #[account(mut)]
    pub authority: Signer<'info>,
    #[account(
        constraint = coordinator_instance.main_authority == authority.key() @ E::NotAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        init_if_needed,
        payer = authority,
        space = RunSpec::SPACE,
        seeds = [RUN_SPEC_SEED, coordinator_instance.key().as_ref()],
        bump,
    )]
    pub run_spec: Account<'info, RunSpec>,
    pub system_program: Program<'info, System>,
}

/// The spec's bytes become `total_len` long (zero-filled past what they held) with `chunk`
/// written at `offset`: `RunSpecTooLarge` past [`RUN_SPEC_MAX_LEN`], `RunSpecChunkOutOfRange`
/// when the chunk ends past `total_len`. Nothing changes on an error.
#[warn(clippy::large_stack_frames)]
pub fn write_chunk(bytes: &mut Vec<u8>, total_len: u32, offset: u32, chunk: &[u8]) -> LogicResult {
    let total = total_len as usize;
    if total > RUN_SPEC_MAX_LEN {
        return Err(E::RunSpecTooLarge);
    }
    let start = offset as usize;
    let end = start
        .checked_add(chunk.len())
        .ok_or(E::RunSpecChunkOutOfRange)?;
    if end > total {
        return Err(E::RunSpecChunkOutOfRange);
    }
    bytes.resize(total, 0);
    bytes[start..end].copy_from_slice(chunk);
    Ok(())
}

#[warn(clippy::large_stack_frames)]
pub fn handler(
    ctx: Context<SetRunSpec>,
    total_len: u32,
    offset: u32,
    chunk: Vec<u8>,
) -> Result<()> {
    let instance = ctx.accounts.coordinator_instance.key();
    let spec = &mut ctx.accounts.run_spec;
    if spec.coordinator_instance == Pubkey::default() {
        spec.bump = ctx.bumps.run_spec;
        spec.coordinator_instance = instance;
    }
    write_chunk(&mut spec.bytes, total_len, offset, &chunk)?;
    Ok(())
}
