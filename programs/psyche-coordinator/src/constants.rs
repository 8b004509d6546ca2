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
