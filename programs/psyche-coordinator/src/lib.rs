//! Psyche coordinator Anchor program: thin instruction handlers over the pure state machine of
//! `psyche-coordinator-core`. The coordinator account's data is the core's `CoordinatorState`
//! (zero-copy); every handler reads the Clock, checks authorities, calls the core and, after a
//! client operation, ticks the core as the Python server does (see `instructions::tick`).
//!
//! Laid out as Anchor's `multiple` template: `instructions/<instruction>.rs` (accounts,
//! constraints, logic, handler), `state/` (the accounts), `constants.rs`, `error.rs`.

// Two lints are off for the crate because of code that Anchor generates, and back on
// (`#[warn(...)]`, an error under `-D warnings`) for every module written by hand, the
// instruction handlers included:
// - `deprecated`: anchor-lang 0.31.1's `#[program]` expands to on-chain IDL instructions that
//   call `AccountInfo::realloc`.
// - `clippy::large_stack_frames` (CI: threshold 4096, the SBF frame) adds up every MIR local
//   of a function, an upper bound. Anchor's `init` account constraints, the IDL instructions
//   and the zero-copy account's by-value `Clone`/`AccountDeserialize` pass it, while their real
//   frames are at most 1,096 bytes (x86-64 release, `-Z emit-stack-sizes`, see README).
#![allow(deprecated, clippy::large_stack_frames)]

use anchor_lang::prelude::*;
// Links the VM's memory and float builtins into the SBF build (scripts/build-sbf), and the
// i128 ones with the calling convention LLVM uses (programs/sbf-int128).
#[cfg(target_os = "solana")]
use psyche_sbf_int128 as _;
#[cfg(target_os = "solana")]
use solana_compiler_builtins as _;

#[warn(deprecated, clippy::large_stack_frames)]
pub mod constants;
#[warn(deprecated, clippy::large_stack_frames)]
pub mod error;
#[warn(deprecated, clippy::large_stack_frames)]
pub mod instructions;
#[warn(deprecated, clippy::large_stack_frames)]
pub mod state;

pub use constants::*;
pub use error::CoordinatorProgramError;
pub use instructions::*;
pub use state::*;

declare_id!("DtgCpTZ47FRh7x8kJirsUG9EmX6mMyZXkwYH91Rjn4eU");

/// What each instruction does to the state, without Anchor's account machinery: plain
/// functions over `&mut CoordinatorState` (the account data), the time and the signer, so they
/// can be tested on a boxed state and are called the same way by the handlers. Each lives in
/// its instruction's module; this gathers them under one name.
pub mod logic {
    pub use crate::error::LogicResult as Result;
    pub use crate::instructions::checkpoint::checkpoint;
    pub use crate::instructions::evidence::evidence;
    pub use crate::instructions::free_coordinator::check_free;
    pub use crate::instructions::health_check::health_check;
    pub use crate::instructions::init_coordinator::{check_run_id_length, init_account_data};
    pub use crate::instructions::join_run::{check_delegate, check_join_permission, join_run};
    pub use crate::instructions::resync::resync;
    pub use crate::instructions::run_accounts::{
        check_layout, layout_version_of, now_from_unix_timestamp,
    };
    pub use crate::instructions::set_delegates::check_delegates;
    pub use crate::instructions::set_paused::set_paused;
    pub use crate::instructions::set_run_spec::write_chunk;
    pub use crate::instructions::settle_points::{credit_contributor, settle_points};
    pub use crate::instructions::synced::synced;
    pub use crate::instructions::tick::tick;
    pub use crate::instructions::update::update;
    pub use crate::instructions::warmup_witness::warmup_witness;
    pub use crate::instructions::withdraw::withdraw;
    pub use crate::instructions::witness::witness;
}

#[warn(deprecated, clippy::large_stack_frames)]
#[program]
pub mod psyche_coordinator {
    use super::*;

    /// Creates a run: the instance PDA and the state (Uninitialized, dummy checkpoint) in the
    /// pre-allocated coordinator account. `set_paused(false)` starts it.
    pub fn init_coordinator(
        ctx: Context<InitCoordinator>,
        run_id: String,
        main_authority: Pubkey,
        join_authority: Pubkey,
        permissionless: bool,
        config: RunConfigParams,
        run_seed: u64,
    ) -> Result<()> {
        init_coordinator::handler(
            ctx,
            run_id,
            main_authority,
            join_authority,
            permissionless,
            config,
            run_seed,
        )
    }

    /// Main authority; the run must be halted (`UpdateNotHalted`, `RunFinished`). `spec_hash`:
    /// SHA-256 of the run spec's bytes (`set_run_spec`), what clients check them against.
    pub fn update(
        ctx: Context<OwnerCoordinatorAccounts>,
        config: Option<RunConfigParams>,
        checkpoint: Option<CheckpointParams>,
        spec_hash: Option<[u8; 32]>,
    ) -> Result<()> {
        update::handler(ctx, config, checkpoint, spec_hash)
    }

    /// Main authority: writes `chunk` at `offset` of the run spec's bytes, which become
    /// `total_len` long (at most 8192: `RunSpecTooLarge`; `RunSpecChunkOutOfRange`), creating
    /// the spec account on the first call. Clients use the bytes only once `update` set their
    /// hash.
    pub fn set_run_spec(
        ctx: Context<SetRunSpec>,
        total_len: u32,
        offset: u32,
        chunk: Vec<u8>,
    ) -> Result<()> {
        set_run_spec::handler(ctx, total_len, offset, chunk)
    }

    /// Main authority: `true` pauses (the core's `pause`), `false` resumes (`resume`).
    pub fn set_paused(ctx: Context<OwnerCoordinatorAccounts>, paused: bool) -> Result<()> {
        set_paused::handler(ctx, paused)
    }

    /// The signer joins the next epoch with its p2p identity, its points going to `identity`
    /// (itself, or an identity listing it as a delegate: `NotADelegate`); then tick.
    pub fn join_run(
        ctx: Context<JoinRunAccounts>,
        p2p_identity: [u8; 32],
        identity: Pubkey,
    ) -> Result<()> {
        join_run::handler(ctx, p2p_identity, identity)
    }

    /// Anyone: advance the state machine by the clock (`Halted` when halted).
    pub fn tick(ctx: Context<PermissionlessCoordinatorAccounts>) -> Result<()> {
        tick::handler(ctx)
    }

    /// An elected witness reports the round's blooms (356 bytes each), merkle root and the
    /// hash of the parameters it trains the step with; then tick.
    pub fn witness(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        step: u32,
        participant_bloom: Vec<u8>,
        broadcast_bloom: Vec<u8>,
        broadcast_merkle: [u8; 32],
        param_hash: [u8; 32],
    ) -> Result<()> {
        witness::handler(
            ctx,
            index,
            step,
            participant_bloom,
            broadcast_bloom,
            broadcast_merkle,
            param_hash,
        )
    }

    /// A client has the model loaded (Warmup); then tick.
    pub fn warmup_witness(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
    ) -> Result<()> {
        warmup_witness::handler(ctx, index)
    }

    /// A client names unhealthy peers (1 to 256 client indices); then tick.
    pub fn health_check(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        targets: Vec<u16>,
    ) -> Result<()> {
        health_check::handler(ctx, index, targets)
    }

    /// An elected verifier of the round that trains `step` (the current step or the one
    /// before) says client `target`'s result for it is bad; `evidence_quorum` distinct
    /// verifiers evict the target (`NotAVerifier`, `InvalidEvidence`, `AlreadyAccused`); then
    /// tick.
    pub fn evidence(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        step: u32,
        target: u16,
    ) -> Result<()> {
        evidence::handler(ctx, index, step, target)
    }

    /// An elected checkpointer records a stored snapshot: its location (`repo`, `revision`)
    /// and the agreed (step, parameter hash) it holds (`CheckpointHashMismatch` otherwise);
    /// then tick.
    pub fn checkpoint(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        repo: String,
        revision: String,
        step: u32,
        param_hash: [u8; 32],
    ) -> Result<()> {
        checkpoint::handler(ctx, index, repo, revision, step, param_hash)
    }

    /// The signer leaves (the next epoch, and this one if healthy); then tick.
    pub fn withdraw(ctx: Context<PermissionlessCoordinatorAccounts>) -> Result<()> {
        withdraw::handler(ctx)
    }

    /// Main authority, halted runs only: closes the instance and the coordinator account,
    /// their lamports go to `spill`.
    pub fn free_coordinator(ctx: Context<FreeCoordinator>) -> Result<()> {
        free_coordinator::handler(ctx)
    }

    /// Main authority: closes a halted run's spec account (`CloseNotHalted` otherwise) and
    /// sends its lamports to `spill`; before `free_coordinator`, which closes the instance.
    pub fn free_run_spec(ctx: Context<FreeRunSpec>) -> Result<()> {
        free_run_spec::handler(ctx)
    }

    /// Join authority: lets `grantee` join this (permissioned) run.
    pub fn authorize_joiner(ctx: Context<AuthorizeJoiner>, grantee: Pubkey) -> Result<()> {
        authorize_joiner::handler(ctx, grantee)
    }

    /// Join authority: removes a grantee's authorization (its lamports go to `spill`).
    /// Clients already joined stay; the grantee cannot join again.
    pub fn revoke_joiner(ctx: Context<RevokeJoiner>) -> Result<()> {
        revoke_joiner::handler(ctx)
    }

    /// A syncing client's parameters for `step` hash to `param_hash`, the agreed pair
    /// (`SyncHashMismatch` otherwise; `WrongPhase` unless Syncing): it warms up next; then
    /// tick.
    pub fn synced(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        step: u32,
        param_hash: [u8; 32],
    ) -> Result<()> {
        synced::handler(ctx, index, step, param_hash)
    }

    /// An Active or WarmingUp client lags and goes back to syncing (`WrongPhase` otherwise);
    /// then tick.
    pub fn resync(ctx: Context<PermissionlessCoordinatorAccounts>, index: u32) -> Result<()> {
        resync::handler(ctx, index)
    }

    /// The identity (signer) lists the node keys that may join as it (at most 8:
    /// `TooManyDelegates`), creating its contributor account if needed.
    pub fn set_delegates(ctx: Context<SetDelegates>, delegates: Vec<Pubkey>) -> Result<()> {
        set_delegates::handler(ctx, delegates)
    }

    /// Anyone: moves the points client slot `index` holds into its identity's contributor
    /// account (`WrongContributor` for another identity's, `NothingToSettle`); then tick.
    pub fn settle_points(ctx: Context<SettlePoints>, index: u32, identity: Pubkey) -> Result<()> {
        settle_points::handler(ctx, index, identity)
    }
}
