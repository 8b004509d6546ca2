//! Psyche coordinator Anchor program: thin instruction handlers over the pure state machine of
//! `psyche-coordinator-core`. The coordinator account's data is the core's `CoordinatorState`
//! (zero-copy); every handler reads the Clock, checks authorities, calls the core and, after a
//! client operation, ticks the core as the Python server does (see `logic`).

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

pub mod contexts;
pub mod coordinator_account;
#[warn(deprecated, clippy::large_stack_frames)]
pub mod error;
#[warn(deprecated, clippy::large_stack_frames)]
pub mod logic;
#[warn(deprecated, clippy::large_stack_frames)]
pub mod state;

pub use contexts::*;
pub use coordinator_account::CoordinatorAccount;
pub use error::CoordinatorProgramError;
pub use state::*;

declare_id!("HFqAvrnHxzXjDJsL2u5ywDiBQxoLuGnuoeGVJ6kA6Svk");

/// The Clock sysvar's time as the core's `now` (negative: `InvalidOperation`).
#[warn(deprecated, clippy::large_stack_frames)]
fn now() -> Result<u64> {
    Ok(logic::now_from_unix_timestamp(
        Clock::get()?.unix_timestamp,
    )?)
}

/// Checks the coordinator account's exact size before it is loaded (a size that
/// `init_coordinator` refused never carries the discriminator, but a shorter account would make
/// Anchor's loader panic instead of failing with a named error).
#[warn(deprecated, clippy::large_stack_frames)]
fn check_account_size(account: &AccountLoader<'_, CoordinatorAccount>) -> Result<()> {
    if account.as_ref().data_len() != CoordinatorAccount::SPACE {
        return Err(CoordinatorProgramError::AccountIncorrectSize.into());
    }
    Ok(())
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
        let account_key = ctx.accounts.coordinator_account.key();
        {
            let info = ctx.accounts.coordinator_account.to_account_info();
            let mut data = info.try_borrow_mut_data()?;
            logic::init_account_data(&mut data, &run_id, &config.to_core(), run_seed)?;
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

    /// Main authority; the run must be halted (`UpdateNotHalted`, `RunFinished`).
    pub fn update(
        ctx: Context<OwnerCoordinatorAccounts>,
        config: Option<RunConfigParams>,
        checkpoint: Option<CheckpointParams>,
    ) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::update(
            account.state_mut(),
            now,
            config.as_ref(),
            checkpoint.as_ref(),
        )?;
        Ok(())
    }

    /// Main authority: `true` pauses (the core's `pause`), `false` resumes (`resume`).
    pub fn set_paused(ctx: Context<OwnerCoordinatorAccounts>, paused: bool) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::set_paused(account.state_mut(), now, paused)?;
        Ok(())
    }

    /// The signer joins the next epoch with its p2p identity; then tick.
    pub fn join_run(ctx: Context<JoinRunAccounts>, p2p_identity: [u8; 32]) -> Result<()> {
        let now = now()?;
        let accounts = &ctx.accounts;
        logic::check_join_permission(
            &accounts.coordinator_instance,
            &accounts.coordinator_instance.key(),
            &accounts.user.key(),
            accounts.authorization.as_deref(),
        )?;
        check_account_size(&accounts.coordinator_account)?;
        let mut account = accounts.coordinator_account.load_mut()?;
        logic::join_run(
            account.state_mut(),
            now,
            &accounts.user.key(),
            &p2p_identity,
        )?;
        Ok(())
    }

    /// Anyone: advance the state machine by the clock (`Halted` when halted).
    pub fn tick(ctx: Context<PermissionlessCoordinatorAccounts>) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::tick(account.state_mut(), now)?;
        Ok(())
    }

    /// An elected witness reports the round's blooms (356 bytes each) and merkle root; then tick.
    pub fn witness(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        step: u32,
        participant_bloom: Vec<u8>,
        broadcast_bloom: Vec<u8>,
        broadcast_merkle: [u8; 32],
    ) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let user = ctx.accounts.user.key();
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::witness(
            account.state_mut(),
            now,
            &user,
            index,
            step,
            &participant_bloom,
            &broadcast_bloom,
            &broadcast_merkle,
        )?;
        Ok(())
    }

    /// A client has the model loaded (Warmup); then tick.
    pub fn warmup_witness(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
    ) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let user = ctx.accounts.user.key();
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::warmup_witness(account.state_mut(), now, &user, index)?;
        Ok(())
    }

    /// A client names unhealthy peers (1 to 256 client indices); then tick.
    pub fn health_check(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        targets: Vec<u16>,
    ) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let user = ctx.accounts.user.key();
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::health_check(account.state_mut(), now, &user, index, &targets)?;
        Ok(())
    }

    /// An elected checkpointer reports the uploaded model (repo, revision); then tick.
    pub fn checkpoint(
        ctx: Context<PermissionlessCoordinatorAccounts>,
        index: u32,
        repo: String,
        revision: String,
    ) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let user = ctx.accounts.user.key();
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::checkpoint(account.state_mut(), now, &user, index, &repo, &revision)?;
        Ok(())
    }

    /// The signer leaves (the next epoch, and this one if healthy); then tick.
    pub fn withdraw(ctx: Context<PermissionlessCoordinatorAccounts>) -> Result<()> {
        let now = now()?;
        check_account_size(&ctx.accounts.coordinator_account)?;
        let user = ctx.accounts.user.key();
        let mut account = ctx.accounts.coordinator_account.load_mut()?;
        logic::withdraw(account.state_mut(), now, &user)?;
        Ok(())
    }

    /// Main authority, halted runs only: closes the instance and the coordinator account,
    /// their lamports go to `spill`.
    pub fn free_coordinator(ctx: Context<FreeCoordinator>) -> Result<()> {
        check_account_size(&ctx.accounts.coordinator_account)?;
        let account = ctx.accounts.coordinator_account.load()?;
        logic::check_free(account.state())?;
        Ok(())
    }

    /// Join authority: lets `grantee` join this (permissioned) run.
    pub fn authorize_joiner(ctx: Context<AuthorizeJoiner>, grantee: Pubkey) -> Result<()> {
        let authorization = &mut ctx.accounts.authorization;
        authorization.bump = ctx.bumps.authorization;
        authorization.coordinator_instance = ctx.accounts.coordinator_instance.key();
        authorization.grantee = grantee;
        Ok(())
    }

    /// Join authority: removes a grantee's authorization (its lamports go to `spill`).
    /// Clients already joined stay; the grantee cannot join again.
    pub fn revoke_joiner(_ctx: Context<RevokeJoiner>) -> Result<()> {
        Ok(())
    }
}
