//! Accounts and instruction argument types.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{CheckpointArgs, CheckpointKind, RunConfig, RUN_ID_LEN};

/// Seed prefix of the [`CoordinatorInstance`] PDA: `["coordinator", run_id bytes]`.
pub const COORDINATOR_SEED: &[u8] = b"coordinator";
/// Seed prefix of the [`JoinAuthorization`] PDA: `["authorization", instance, grantee]`.
pub const AUTHORIZATION_SEED: &[u8] = b"authorization";

/// The run's identity and authorities (a small borsh account; PDA `["coordinator", run_id]`).
#[account]
#[derive(InitSpace, Debug, PartialEq, Eq)]
pub struct CoordinatorInstance {
    pub bump: u8,
    /// May `update`, `set_paused` and `free_coordinator`.
    pub main_authority: Pubkey,
    /// May `authorize_joiner` and `revoke_joiner`.
    pub join_authority: Pubkey,
    /// Anyone may `join_run`; otherwise a [`JoinAuthorization`] for the signer is required.
    pub permissionless: bool,
    /// The [`CoordinatorAccount`](crate::CoordinatorAccount) holding the state.
    pub coordinator_account: Pubkey,
    /// 1 to 32 bytes.
    #[max_len(32)]
    pub run_id: String,
}

impl CoordinatorInstance {
    /// Account size including the discriminator.
    pub const SPACE: usize = 8 + Self::INIT_SPACE;
}

/// Lets `grantee` join the run of `coordinator_instance` when it is not permissionless.
/// PDA `["authorization", coordinator_instance, grantee]`, created by the join authority.
#[account]
#[derive(InitSpace, Debug, PartialEq, Eq)]
pub struct JoinAuthorization {
    pub bump: u8,
    pub coordinator_instance: Pubkey,
    pub grantee: Pubkey,
}

impl JoinAuthorization {
    pub const SPACE: usize = 8 + Self::INIT_SPACE;
}

/// The seed for a run id: its first (at most 32) bytes. A longer id is then refused by the
/// handler with `RunIdInvalidLength` (a seed over 32 bytes would make the PDA derivation
/// fail before the handler runs).
pub fn run_id_seed(run_id: &str) -> &[u8] {
    let raw = run_id.as_bytes();
    &raw[..raw.len().min(RUN_ID_LEN)]
}

/// `RunConfig` as an instruction argument (the core's struct minus its zero padding).
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
    pub min_clients: u16,
    pub init_min_clients: u16,
    pub witness_nodes: u16,
    pub global_batch_size_start: u16,
    pub global_batch_size_end: u16,
    pub verification_percent: u8,
    pub checkpointer_percent: u8,
    pub waiting_for_members_extra_time: u8,
}

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
            min_clients: self.min_clients,
            init_min_clients: self.init_min_clients,
            witness_nodes: self.witness_nodes,
            global_batch_size_start: self.global_batch_size_start,
            global_batch_size_end: self.global_batch_size_end,
            verification_percent: self.verification_percent,
            checkpointer_percent: self.checkpointer_percent,
            waiting_for_members_extra_time: self.waiting_for_members_extra_time,
            _pad: [0; 3],
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
            min_clients: c.min_clients,
            init_min_clients: c.init_min_clients,
            witness_nodes: c.witness_nodes,
            global_batch_size_start: c.global_batch_size_start,
            global_batch_size_end: c.global_batch_size_end,
            verification_percent: c.verification_percent,
            checkpointer_percent: c.checkpointer_percent,
            waiting_for_members_extra_time: c.waiting_for_members_extra_time,
        }
    }
}

/// Where joiners load the model from (`CheckpointKind`).
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointKindParam {
    Dummy,
    Hub,
    P2P,
}

impl CheckpointKindParam {
    pub fn to_core(self) -> CheckpointKind {
        match self {
            Self::Dummy => CheckpointKind::Dummy,
            Self::Hub => CheckpointKind::Hub,
            Self::P2P => CheckpointKind::P2P,
        }
    }
}

/// A checkpoint as an `update` argument: repo and revision at most 64 bytes of UTF-8 each
/// (checked by the core: `InvalidCheckpoint`).
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointParams {
    pub kind: CheckpointKindParam,
    pub repo: String,
    pub revision: String,
}

impl CheckpointParams {
    pub fn as_core(&self) -> CheckpointArgs<'_> {
        CheckpointArgs {
            kind: self.kind.to_core(),
            repo: self.repo.as_bytes(),
            revision: self.revision.as_bytes(),
        }
    }
}
