//! The seeds of the program's PDAs.

/// Seed prefix of the [`CoordinatorInstance`](crate::CoordinatorInstance) PDA:
/// `["coordinator", run_id bytes]` (see [`run_id_seed`](crate::run_id_seed)).
pub const COORDINATOR_SEED: &[u8] = b"coordinator";
/// Seed prefix of the [`JoinAuthorization`](crate::JoinAuthorization) PDA:
/// `["authorization", instance, grantee]`.
pub const AUTHORIZATION_SEED: &[u8] = b"authorization";
/// Seed prefix of the [`Contributor`](crate::Contributor) PDA:
/// `["contributor", instance, identity]`.
pub const CONTRIBUTOR_SEED: &[u8] = b"contributor";
/// Seed prefix of the [`RunSpec`](crate::RunSpec) PDA: `["run_spec", instance]`.
pub const RUN_SPEC_SEED: &[u8] = b"run_spec";
/// The most bytes a run spec may hold (its canonical JSON; the account is allocated at this size
/// once, under the 10 KiB a program may allocate).
pub const RUN_SPEC_MAX_LEN: usize = 8192;
