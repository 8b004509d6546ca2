//! One module per instruction: its account list (Anchor `Accounts`) with its constraints, its
//! `*Params` argument types, what it does to the state as a plain function (testable on a
//! boxed state, see [`crate::logic`]), and the `handler` that `lib.rs` dispatches to.
//! `run_accounts` holds the account lists several instructions share and their common
//! prologue (Clock, account size, zero-copy load).

// The code Anchor generates for an `init` constraint sums past clippy's `large_stack_frames`
// threshold (see `lib.rs`): these modules allow the lint and switch it back on for each
// hand-written item.
#[allow(clippy::large_stack_frames)]
pub mod authorize_joiner;
pub mod checkpoint;
pub mod evidence;
pub mod free_coordinator;
pub mod free_run_spec;
pub mod health_check;
#[allow(clippy::large_stack_frames)]
pub mod init_coordinator;
#[allow(clippy::large_stack_frames)]
pub mod join_run;
pub mod resync;
pub mod revoke_joiner;
pub mod run_accounts;
#[allow(clippy::large_stack_frames)]
pub mod set_delegates;
pub mod set_paused;
#[allow(clippy::large_stack_frames)]
pub mod set_run_spec;
#[allow(clippy::large_stack_frames)]
pub mod settle_points;
pub mod synced;
pub mod tick;
pub mod update;
pub mod warmup_witness;
pub mod withdraw;
pub mod witness;

pub use authorize_joiner::AuthorizeJoiner;
pub use free_coordinator::FreeCoordinator;
pub use free_run_spec::FreeRunSpec;
pub use init_coordinator::{InitCoordinator, RunConfigParams};
pub use join_run::JoinRunAccounts;
pub use revoke_joiner::RevokeJoiner;
pub use run_accounts::{OwnerCoordinatorAccounts, PermissionlessCoordinatorAccounts, RunAccounts};
pub use set_delegates::SetDelegates;
pub use set_run_spec::SetRunSpec;
pub use settle_points::SettlePoints;
pub use update::{CheckpointKindParam, CheckpointParams};

// `#[program]` looks up the client modules that `#[derive(Accounts)]` generates beside each
// account list at the crate root (`crate::__client_accounts_*`); these globs carry them there.
// Crate-visible only: the state functions are named like the `#[program]` functions and the
// `handler`s like each other, so a public glob would make those names ambiguous.
pub(crate) use {
    authorize_joiner::*, free_coordinator::*, free_run_spec::*, init_coordinator::*, join_run::*, revoke_joiner::*,
    run_accounts::*, set_delegates::*, set_run_spec::*, settle_points::*,
};
