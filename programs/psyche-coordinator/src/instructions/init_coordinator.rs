//! `init_coordinator`: creates a run in an account its creator pre-allocated.
//!
//! `large_stack_frames` is allowed for the code Anchor generates here (see `lib.rs`): the
//! `init` constraint sums past 4096 bytes of MIR locals, its real frame is far smaller. The
//! hand-written items switch the lint back on.

use anchor_lang::prelude::*;
use anchor_lang::Discriminator;
use psyche_coordinator_core::{
    self as core_sm, CheckpointArgs, CoordinatorState, RunConfig, RUN_ID_LEN,
};

use crate::constants::COORDINATOR_SEED;
use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{run_id_seed, CoordinatorAccount, CoordinatorInstance};

#[derive(Accounts)]
#[instruction(run_id: String)]
pub struct InitCoordinator<'info> {
    #[account(mut)]
    pub payer: Signer<'info>,
    #[account(
        init,
        payer = payer,
        space = CoordinatorInstance::SPACE,
        seeds = [COORDINATOR_SEED, run_id_seed(&run_id)],
        bump,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    /// CHECK: pre-allocated in the same transaction by a system `create_account` (owner = this
    /// program, exactly `CoordinatorAccount::SPACE` bytes, all zero); the handler checks the
    /// size and the zero discriminator, then writes the state and the discriminator.
    #[account(mut, owner = crate::ID)]
    pub coordinator_account: UncheckedAccount<'info>,
    pub system_program: Program<'info, System>,
}

/// `RunConfig` as an instruction argument (the core's struct, field for field, without its
/// padding).
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunConfigParams {
    pub warmup_time: u64,
    pub cooldown_time: u64,
    pub max_round_train_time: u64,
    pub round_witness_time: u64,
    pub epoch_time: u64,
    pub global_batch_size_warmup_tokens: u64,
    pub total_steps: u32,
    pub max_seq_len: u32,
    pub checkpoint_interval: u32,
    pub min_clients: u16,
    pub init_min_clients: u16,
    pub witness_nodes: u16,
    pub global_batch_size_start: u16,
    pub global_batch_size_end: u16,
    pub max_clients: u16,
    pub max_syncing: u16,
    pub kept_rounds: u16,
    pub verification_percent: u8,
    pub checkpointer_percent: u8,
    pub waiting_for_members_extra_time: u8,
    pub sync_warmup_rounds: u8,
    pub flops_per_token: u64,
    pub tokens_per_compute_point: u64,
    pub points_cap: u64,
    pub presence_points: u32,
    pub evidence_quorum: u16,
    pub verify_sample: u8,
}

#[warn(clippy::large_stack_frames)]
impl RunConfigParams {
    pub fn to_core(&self) -> RunConfig {
        RunConfig {
            warmup_time: self.warmup_time,
            cooldown_time: self.cooldown_time,
            max_round_train_time: self.max_round_train_time,
            round_witness_time: self.round_witness_time,
            epoch_time: self.epoch_time,
            global_batch_size_warmup_tokens: self.global_batch_size_warmup_tokens,
            total_steps: self.total_steps,
            max_seq_len: self.max_seq_len,
            checkpoint_interval: self.checkpoint_interval,
            min_clients: self.min_clients,
            init_min_clients: self.init_min_clients,
            witness_nodes: self.witness_nodes,
            global_batch_size_start: self.global_batch_size_start,
            global_batch_size_end: self.global_batch_size_end,
            max_clients: self.max_clients,
            max_syncing: self.max_syncing,
            kept_rounds: self.kept_rounds,
            verification_percent: self.verification_percent,
            checkpointer_percent: self.checkpointer_percent,
            waiting_for_members_extra_time: self.waiting_for_members_extra_time,
            sync_warmup_rounds: self.sync_warmup_rounds,
            flops_per_token: self.flops_per_token,
            tokens_per_compute_point: self.tokens_per_compute_point,
            points_cap: self.points_cap,
            presence_points: self.presence_points,
            evidence_quorum: self.evidence_quorum,
            verify_sample: self.verify_sample,
            _pad: [0; 1],
        }
    }

    pub fn from_core(c: &RunConfig) -> Self {
        Self {
            warmup_time: c.warmup_time,
            cooldown_time: c.cooldown_time,
            max_round_train_time: c.max_round_train_time,
            round_witness_time: c.round_witness_time,
            epoch_time: c.epoch_time,
            global_batch_size_warmup_tokens: c.global_batch_size_warmup_tokens,
            total_steps: c.total_steps,
            max_seq_len: c.max_seq_len,
            checkpoint_interval: c.checkpoint_interval,
            min_clients: c.min_clients,
            init_min_clients: c.init_min_clients,
            witness_nodes: c.witness_nodes,
            global_batch_size_start: c.global_batch_size_start,
            global_batch_size_end: c.global_batch_size_end,
            max_clients: c.max_clients,
            max_syncing: c.max_syncing,
            kept_rounds: c.kept_rounds,
            verification_percent: c.verification_percent,
            checkpointer_percent: c.checkpointer_percent,
            waiting_for_members_extra_time: c.waiting_for_members_extra_time,
            sync_warmup_rounds: c.sync_warmup_rounds,
            flops_per_token: c.flops_per_token,
            tokens_per_compute_point: c.tokens_per_compute_point,
            points_cap: c.points_cap,
            presence_points: c.presence_points,
            evidence_quorum: c.evidence_quorum,
            verify_sample: c.verify_sample,
        }
    }
}

/// 1 to 32 bytes, else `RunIdInvalidLength` (the core then also requires NUL-free UTF-8:
/// `InvalidRunId`).
#[warn(clippy::large_stack_frames)]
pub fn check_run_id_length(run_id: &str) -> LogicResult {
    if run_id.is_empty() || run_id.len() > RUN_ID_LEN {
        return Err(E::RunIdInvalidLength);
    }
    Ok(())
}

/// `init_coordinator` on the pre-allocated account data (discriminator included): exact size
/// (`AccountIncorrectSize`), never initialized (`AccountAlreadyInitialized`), then the core's
/// `new_run` (Uninitialized, dummy checkpoint) and finally the discriminator.
#[warn(clippy::large_stack_frames)]
pub fn init_account_data(
    data: &mut [u8],
    run_id: &str,
    config: &RunConfig,
    run_seed: u64,
) -> LogicResult {
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

#[warn(clippy::large_stack_frames)]
pub fn handler(
    ctx: Context<InitCoordinator>,
    run_id: String,
    main_authority: Pubkey,
    join_authority: Pubkey,
    permissionless: bool,
    config: RunConfigParams,
    run_seed: u64,
) -> Result<()> {
    let account_key = ctx.accounts.coordinator_account.key();
    {
        let info = ctx.accounts.coordinator_account.to_account_info();
        let mut data = info.try_borrow_mut_data()?;
        init_account_data(&mut data, &run_id, &config.to_core(), run_seed)?;
    }
    let instance = &mut ctx.accounts.coordinator_instance;
    instance.bump = ctx.bumps.coordinator_instance;
    instance.main_authority = main_authority;
    instance.join_authority = join_authority;
    instance.permissionless = permissionless;
    instance.coordinator_account = account_key;
    instance.run_id = run_id;
    Ok(())
}
