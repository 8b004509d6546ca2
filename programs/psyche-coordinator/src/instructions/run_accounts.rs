//! The account lists that several instructions share, and the prologue of every instruction
//! that reads or changes the run's state, written once: read the Clock, check the account's
//! layout version and size, load it zero-copy.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{CoordinatorState, LAYOUT_VERSION, VERSION_OFFSET};

use crate::error::{CoordinatorProgramError as E, LogicResult};
use crate::state::{CoordinatorAccount, CoordinatorInstance};

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
/// `witness`, `health_check`, `checkpoint`, `synced`, `resync`: the core checks that `user`
/// is the client).
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

/// The Clock's `unix_timestamp` as the core's `now`: a negative time is refused as
/// `InvalidOperation`, as Python's `apply` does ("time must be a non-negative integer").
pub fn now_from_unix_timestamp(unix_timestamp: i64) -> LogicResult<u64> {
    u64::try_from(unix_timestamp).map_err(|_| E::InvalidOperation)
}

/// The layout version of coordinator account data (discriminator included): the u32 at
/// `VERSION_OFFSET` of the state, where version 1 had zero padding; None when the data is too
/// short to hold one.
pub fn layout_version_of(data: &[u8]) -> Option<u32> {
    let at = 8 + VERSION_OFFSET;
    let raw: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
    Some(match u32::from_le_bytes(raw) {
        0 => 1,
        v => v,
    })
}

/// The account data's layout version (`LayoutVersionMismatch`), then its exact size
/// (`AccountIncorrectSize`).
pub fn check_layout(data: &[u8]) -> LogicResult {
    match layout_version_of(data) {
        Some(v) if v != LAYOUT_VERSION => return Err(E::LayoutVersionMismatch),
        _ => {}
    }
    if data.len() != CoordinatorAccount::SPACE {
        return Err(E::AccountIncorrectSize);
    }
    Ok(())
}

/// The accounts of an instruction over the run's state (`coordinator_account`, already
/// checked to be the run's by its `address` constraint).
pub trait RunAccounts<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount>;

    /// The instruction's own checks, after the Clock is read and before the state is loaded
    /// (`join_run`'s permission); none by default.
    fn authorize(&self) -> Result<()> {
        Ok(())
    }

    /// The coordinator account once its layout version and exact size are checked. The
    /// version first: an account another version of the program made (another size, fields
    /// elsewhere) fails with `LayoutVersionMismatch` instead of being misread. A size that
    /// `init_coordinator` refused never carries the discriminator, but a shorter account would
    /// make Anchor's loader panic instead of failing with a named error.
    fn sized_coordinator_account(&self) -> Result<&AccountLoader<'info, CoordinatorAccount>> {
        let account = self.coordinator_account();
        let data = account.as_ref().try_borrow_data()?;
        check_layout(&data)?;
        Ok(account)
    }

    /// The prologue, then `op` on the state at the Clock's time: `now` (negative:
    /// `InvalidOperation`), [`authorize`](Self::authorize), the layout version and size checks,
    /// the zero-copy load; returns what `op` returns. (The core checks the version again in every
    /// operation.)
    fn apply<T>(
        &self,
        op: impl FnOnce(&mut CoordinatorState, u64) -> LogicResult<T>,
    ) -> Result<T> {
        let now = now_from_unix_timestamp(Clock::get()?.unix_timestamp)?;
        self.authorize()?;
        let mut account = self.sized_coordinator_account()?.load_mut()?;
        Ok(op(account.state_mut(), now)?)
    }
}

impl<'info> RunAccounts<'info> for OwnerCoordinatorAccounts<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount> {
        &self.coordinator_account
    }
}

impl<'info> RunAccounts<'info> for PermissionlessCoordinatorAccounts<'info> {
    fn coordinator_account(&self) -> &AccountLoader<'info, CoordinatorAccount> {
        &self.coordinator_account
    }
}
