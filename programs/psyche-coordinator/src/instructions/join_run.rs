//! `join_run`: the signer joins the next epoch, if the run admits it.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{self as core_sm, CoordinatorState};

use super::run_accounts::RunAccounts;
use super::tick::then_tick;
use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{CoordinatorAccount, CoordinatorInstance, JoinAuthorization};

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

impl<'info> RunAccounts<'info> for JoinRunAccounts<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount> {
        &self.coordinator_account
    }

    fn authorize(&self) -> Result<()> {
        Ok(check_join_permission(
            &self.coordinator_instance,
            &self.coordinator_instance.key(),
            &self.user.key(),
            self.authorization.as_deref(),
        )?)
    }
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
) -> LogicResult {
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

pub fn join_run(
    s: &mut CoordinatorState,
    now: u64,
    signer: &Pubkey,
    p2p_identity: &[u8; 32],
) -> LogicResult {
    let op = core_sm::join(s, now, signer.as_ref(), p2p_identity);
    then_tick(s, now, op)
}

pub fn handler(ctx: Context<JoinRunAccounts>, p2p_identity: [u8; 32]) -> Result<()> {
    let user = ctx.accounts.user.key();
    ctx.accounts
        .apply(|s, now| join_run(s, now, &user, &p2p_identity))
}
