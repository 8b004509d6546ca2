//! The program's accounts: the run's instance, join authorizations, contributors and the run's
//! spec (borsh accounts) and the zero-copy coordinator account holding the core's state.

// Anchor's zero-copy derives sum past clippy's `large_stack_frames` threshold (see the module).
#[allow(clippy::large_stack_frames)]
pub mod coordinator_account;
pub mod contributor;
pub mod coordinator_instance;
pub mod join_authorization;
pub mod run_spec;

pub use contributor::Contributor;
pub use coordinator_account::CoordinatorAccount;
pub use coordinator_instance::{run_id_seed, CoordinatorInstance};
pub use join_authorization::JoinAuthorization;
pub use run_spec::RunSpec;
