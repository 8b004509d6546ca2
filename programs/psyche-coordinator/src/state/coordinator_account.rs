//! The zero-copy coordinator account.
//!
//! Anchor's `#[account(zero_copy)]` derives `Clone` and a client-side `AccountDeserialize` that
//! return the 163 KB struct by value; clippy's `large_stack_frames` counts that value as a
//! stack local, although they copy straight into the caller's memory (measured frames at
//! most 264 bytes, x86-64 release) and the program never calls them. The lint is allowed for
//! this module only and switched back on for its hand-written methods.

use anchor_lang::prelude::*;
use psyche_coordinator_core::{CoordinatorState, STATE_SIZE};

/// The coordinator state, zero-copy: after the 8-byte discriminator the account data is
/// exactly the core's [`CoordinatorState`] (187,328 bytes, the canonical layout of
/// `psyche_coordinator_core/canonical.py`, little-endian).
///
/// The field is declared as bytes because the core's types cannot implement Anchor's IDL
/// traits from this crate; [`CoordinatorAccount::state`] / [`CoordinatorAccount::state_mut`]
/// view it as the core struct (`align(8)` makes that cast infallible). The IDL therefore shows
/// `state: [u8; 187328]`: clients decode it with the canonical layout.
///
/// Too large for a CPI allocation (10 KiB): the run creator pre-allocates it with a system
/// `create_account` (owner = this program, exactly [`CoordinatorAccount::SPACE`] bytes, all
/// zero) in the same transaction as `init_coordinator`.
#[account(zero_copy)]
#[repr(C, align(8))]
pub struct CoordinatorAccount {
    pub state: [u8; STATE_SIZE],
}

const _: () = assert!(core::mem::size_of::<CoordinatorAccount>() == STATE_SIZE);
const _: () = assert!(core::mem::align_of::<CoordinatorAccount>() == 8);
const _: () = assert!(core::mem::align_of::<CoordinatorState>() == 8);

#[warn(clippy::large_stack_frames)]
impl CoordinatorAccount {
    /// Account size including the discriminator: 187,336 bytes.
    pub const SPACE: usize = 8 + STATE_SIZE;

    pub fn state(&self) -> &CoordinatorState {
        bytemuck::from_bytes(&self.state)
    }

    pub fn state_mut(&mut self) -> &mut CoordinatorState {
        bytemuck::from_bytes_mut(&mut self.state)
    }
}
