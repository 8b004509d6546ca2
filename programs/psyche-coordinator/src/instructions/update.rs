//! `update`: the main authority changes a halted run's config, checkpoint or spec hash.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CheckpointArgs, CheckpointKind, CoordinatorState};

use super::run_accounts::{OwnerCoordinatorAccounts, RunAccounts};
use super::RunConfigParams;
use crate::error::LogicResult;

/// Where joiners load the model from (`CheckpointKind`).
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointKindParam {
    Dummy,
    Hub,
    P2P,
    Stored,
}

impl CheckpointKindParam {
    pub fn to_core(self) -> CheckpointKind {
        match self {
            Self::Dummy => CheckpointKind::Dummy,
            Self::Hub => CheckpointKind::Hub,
            Self::P2P => CheckpointKind::P2P,
            Self::Stored => CheckpointKind::Stored,
        }
    }
}

/// A checkpoint as an `update` argument: repo and revision at most 64 bytes of UTF-8 each,
/// and for `Stored` a nonzero parameter hash (checked by the core: `InvalidCheckpoint`).
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointParams {
    pub kind: CheckpointKindParam,
    pub repo: String,
    pub revision: String,
    /// The recorded snapshot's parameter hash (zero when none is).
    pub hash: [u8; 32],
    /// The step its parameters train.
    pub step: u32,
}

impl CheckpointParams {
    pub fn as_core(&self) -> CheckpointArgs<'_> {
        CheckpointArgs {
            kind: self.kind.to_core(),
            repo: self.repo.as_bytes(),
            revision: self.revision.as_bytes(),
            hash: &self.hash,
            step: self.step,
        }
    }
}

pub fn update(
    s: &mut CoordinatorState,
    now: u64,
    config: Option<&RunConfigParams>,
    checkpoint: Option<&CheckpointParams>,
    spec_hash: Option<&[u8; 32]>,
) -> LogicResult {
    let config = config.map(RunConfigParams::to_core);
    let checkpoint = checkpoint.map(CheckpointParams::as_core);
    Ok(core_sm::update(
        s,
        now,
        config.as_ref(),
        checkpoint.as_ref(),
        spec_hash.map(|h| &h[..]),
    )?)
}

pub fn handler(
    ctx: Context<OwnerCoordinatorAccounts>,
    config: Option<RunConfigParams>,
    checkpoint: Option<CheckpointParams>,
    spec_hash: Option<[u8; 32]>,
) -> Result<()> {
    ctx.accounts.apply(|s, now| {
        update(
            s,
            now,
            config.as_ref(),
            checkpoint.as_ref(),
            spec_hash.as_ref(),
        )
    })
}
