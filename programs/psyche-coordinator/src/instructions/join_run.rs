//! `join_run`: the signer joins the next epoch as a contributor identity (itself, or an
//! identity that lists it as a delegate), if the run admits it.
//!
//! `large_stack_frames` is allowed for the code Anchor generates here (see `lib.rs`): the
//! `init_if_needed` constraint sums past 4096 bytes of MIR locals. The hand-written items
//! switch the lint back on.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::RunAccounts;
use super::tick::then_tick;
use crate::constants::CONTRIBUTOR_SEED;
use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{Contributor, CoordinatorAccount, CoordinatorInstance, JoinAuthorization};

#[derive(Accounts)]
#[instruction(p2p_identity: [u8; 32], identity: Pubkey)]
pub struct JoinRunAccounts<'info> {
    /// Pays for the contributor account when it joins as itself for the first time.
    #[account(mut)]
    pub user: Signer<'info>,
    pub coordinator_instance: Account<'info, CoordinatorInstance>,
    #[account(
        mut,
        address = coordinator_instance.coordinator_account @ E::WrongCoordinatorAccount,
    )]
    pub coordinator_account: AccountLoader<'info, CoordinatorAccount>,
    /// Required unless the run is permissionless: the identity's `JoinAuthorization` for this
    /// run (it covers the identity's delegates; pass the program id to omit it).
    pub authorization: Option<Account<'info, JoinAuthorization>>,
    /// The identity's contributor account. Created here (paid by `user`) when `identity` is
    /// the signer; for another identity it must list the signer as a delegate (`NotADelegate`;
    /// one created here for another identity has no delegates, so the join fails and the
    /// creation is rolled back).
    #[account(
        init_if_needed,
        payer = user,
        space = Contributor::SPACE,
        seeds = [CONTRIBUTOR_SEED, coordinator_instance.key().as_ref(), identity.as_ref()],
        bump,
    )]
    pub contributor: Account<'info, Contributor>,
    pub system_program: Program<'info, System>,
}

#[warn(clippy::large_stack_frames)]
impl<'info> RunAccounts<'info> for JoinRunAccounts<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount> {
        &self.coordinator_account
    }

    fn authorize(&self) -> Result<()> {
        let identity = self.contributor.identity;
        check_delegate(&self.contributor, &self.user.key(), &identity)?;
        Ok(check_join_permission(
            &self.coordinator_instance,
            &self.coordinator_instance.key(),
            &identity,
            self.authorization.as_deref(),
        )?)
    }
}

/// A signer may join as `identity` when it is the identity, or listed among the identity's
/// delegates (`NotADelegate` otherwise).
#[warn(clippy::large_stack_frames)]
pub fn check_delegate(contributor: &Contributor, signer: &Pubkey, identity: &Pubkey) -> LogicResult {
    if signer == identity || contributor.delegates.contains(signer) {
        return Ok(());
    }
    Err(E::NotADelegate)
}

/// `join_run`'s permission: a permissionless run admits anyone; otherwise the identity the
/// signer joins as needs a `JoinAuthorization` of this run granted to it (`NotAuthorized`
/// without one, `AuthorizationMismatch` for another run's, `SignerMismatch` for another
/// grantee's). On a permissionless run a passed authorization is ignored.
#[warn(clippy::large_stack_frames)]
pub fn check_join_permission(
    instance: &CoordinatorInstance,
    instance_key: &Pubkey,
    identity: &Pubkey,
    authorization: Option<&JoinAuthorization>,
) -> LogicResult {
    if instance.permissionless {
        return Ok(());
    }
    let auth = authorization.ok_or(E::NotAuthorized)?;
    if &auth.coordinator_instance != instance_key {
        return Err(E::AuthorizationMismatch);
    }
    if &auth.grantee != identity {
        return Err(E::SignerMismatch);
    }
    Ok(())
}

/// The core's `join` with the identity the points go to, then tick.
#[warn(clippy::large_stack_frames)]
pub fn join_run(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    p2p_identity: &[u8; 32],
    identity: &Pubkey,
) -> LogicResult {
    let op = core_sm::join(
        s,
        now,
        signer.as_ref(),
        p2p_identity,
        Some(identity.as_ref()),
    );
    then_tick(s, now, op)
}

#[warn(clippy::large_stack_frames)]
pub fn handler(
    ctx: Context<JoinRunAccounts>,
    p2p_identity: [u8; 32],
    identity: Pubkey,
) -> Result<()> {
    let instance = ctx.accounts.coordinator_instance.key();
    ctx.accounts
        .contributor
        .init_if_new(ctx.bumps.contributor, instance, identity);
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| join_run(s, now, &user, &p2p_identity, &identity))
}
