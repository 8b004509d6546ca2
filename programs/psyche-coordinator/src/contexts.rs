//! The account lists of the instructions (Anchor `Accounts`), with their authority checks.
//!
//! `large_stack_frames` is allowed for this module (see `lib.rs`): the `init` constraints'
//! generated code sums past 4096 bytes of MIR locals, real frames are at most 1,096 bytes.

use anchor_lang::prelude::*;

use crate::coordinator_account::CoordinatorAccount;
use crate::error::CoordinatorProgramError as E;
use crate::state::{
    run_id_seed, CoordinatorInstance, JoinAuthorization, AUTHORIZATION_SEED, COORDINATOR_SEED,
};

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

/// Instructions of the run's main authority (`update`, `set_paused`).
#[derive(Accounts)]
pub struct OwnerCoordinatorAccounts<'info> {
    pub authority: Signer<'info>,
    #[account(
        constraint = coordinator_instance.main_authority == authority.key() @ E::NotAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount,
    )]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
}

/// Instructions anyone may send (`tick`) and the clients' own (`withdraw`, `warmup_witness`,
/// `witness`, `health_check`, `checkpoint`: the core checks that `user` is the client).
#[derive(Accounts)]
pub struct PermissionlessCoordinatorAccounts<'info> {
    pub user: Signer<'info>,
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount,
    )]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
}

#[derive(Accounts)]
pub struct JoinRunAccounts<'info> {
    pub user: Signer<'info>,
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount,
    )]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
    /// Required unless the run is permissionless: the signer's `JoinAuthorization` for this run
    /// (pass the program id to omit it).
    pub authorization: Option<Account<'info, JoinAuthorization>>,
}

#[derive(Accounts)]
pub struct FreeCoordinator<'info> {
    pub authority: Signer<'info>,
    /// CHECK: any writable account; receives the lamports of both closed accounts.
    #[account(mut)]
    pub spill: UncheckedAccount<'info>,
    #[account(
        mut,
        close = spill,
        constraint = coordinator_instance.main_authority == authority.key() @ E::NotAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        close = spill,
        address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount,
    )]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
}

#[derive(Accounts)]
#[instruction(grantee: Pubkey)]
pub struct AuthorizeJoiner<'info> {
    #[account(mut)]
    pub payer: Signer<'info>,
    pub join_authority: Signer<'info>,
    #[account(
        constraint = coordinator_instance.join_authority == join_authority.key() @ E::NotJoinAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        init,
        payer = payer,
        space = JoinAuthorization::SPACE,
        seeds = [AUTHORIZATION_SEED, coordinator_instance.key().as_ref(), grantee.as_ref()],
        bump,
    )]
    pub authorization: Account<'info, JoinAuthorization>,
    pub system_program: Program<'info, System>,
}

#[derive(Accounts)]
pub struct RevokeJoiner<'info> {
    pub join_authority: Signer<'info>,
    /// CHECK: any writable account; receives the authorization's lamports.
    #[account(mut)]
    pub spill: UncheckedAccount<'info>,
    #[account(
        constraint = coordinator_instance.join_authority == join_authority.key() @ E::NotJoinAuthority,
    )]
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        close = spill,
        constraint = authorization.coordinator_instance == coordinator_instance.key() @ E::AuthorizationMismatch,
    )]
    pub authorization: Account<'info, JoinAuthorization>,
}
