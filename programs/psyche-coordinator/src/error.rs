//! Every failure of the program is a named Anchor error.
//!
//! Codes 6000 + n are the core's `CoordinatorError` variants, same names, same order
//! (`code - 6000 == CoordinatorError as u32`); codes 6100.. are the program's own checks
//! (accounts, authorities). The conversion from the core error is an exhaustive `match`, so a
//! new core variant does not compile until it has a program error of the same name.

use anchor_lang::prelude::*;
use psyche_coordinator_core::CoordinatorError;

/// First code of the program's own errors (after the core's).
pub const PROGRAM_ERRORS_START: u32 = 100;

/// What an instruction's logic returns: the program error itself, without Anchor's wrapping,
/// so that tests compare it directly.
pub type LogicResult<T = ()> = core::result::Result<T, CoordinatorProgramError>;

#[error_code]
#[derive(PartialEq, Eq)]
pub enum CoordinatorProgramError {
    // ---- the core's CoordinatorError, 1:1 (6000 + core code)
    #[msg("the run is halted (Uninitialized, Paused or Finished)")]
    Halted = 0,
    #[msg("the operation is not allowed in the current run state")]
    InvalidRunState = 1,
    #[msg("the signer is not a healthy client at that index")]
    NotAClient = 2,
    #[msg("client index out of range")]
    InvalidClientIndex = 3,
    #[msg("the signer has already joined the next epoch")]
    AlreadyJoined = 4,
    #[msg("no room for another client")]
    ClientsFull = 5,
    #[msg("more clients than batches")]
    MoreClientsThanBatches = 6,
    #[msg("the signer is not a witness of this round")]
    NotAWitness = 7,
    #[msg("this client has already witnessed the round")]
    DuplicateWitness = 8,
    #[msg("the round has no room for another witness")]
    WitnessesFull = 9,
    #[msg("a bloom filter is malformed")]
    MalformedBloom = 10,
    #[msg("invalid health check")]
    InvalidHealthCheck = 11,
    #[msg("the signer has nothing to withdraw from")]
    InvalidWithdraw = 12,
    #[msg("the run is neither Paused nor Uninitialized")]
    CannotResume = 13,
    #[msg("the signer is not an elected checkpointer")]
    NotACheckpointer = 14,
    #[msg("invalid checkpoint")]
    InvalidCheckpoint = 15,
    #[msg("the checkpoint's step and parameter hash are not the pair the witnesses agreed on")]
    CheckpointHashMismatch = 16,
    #[msg("the coordinator account has another layout version than this program reads")]
    LayoutVersionMismatch = 17,
    #[msg("pause the run before updating it")]
    UpdateNotHalted = 18,
    #[msg("the run is finished")]
    RunFinished = 19,
    #[msg("invalid run config")]
    InvalidConfig = 20,
    #[msg("the run id must be 1 to 32 bytes of NUL-free UTF-8")]
    InvalidRunId = 21,
    #[msg("invalid operation or argument")]
    InvalidOperation = 22,
    #[msg("the run is full: it has max_clients clients; try again later")]
    RunFull = 23,
    #[msg("the client is not in a phase that may send this")]
    WrongPhase = 24,
    #[msg("the synced step and parameter hash are not the pair the witnesses agreed on")]
    SyncHashMismatch = 25,
    #[msg("client slots hold unsettled points: settle them first")]
    PointsUnsettled = 26,
    #[msg("the client slot holds no unsettled points")]
    NothingToSettle = 27,
    #[msg("the signer is not an elected verifier of that step's round")]
    NotAVerifier = 28,
    #[msg("invalid evidence: wrong step, or the target trained no batch in it or is not healthy")]
    InvalidEvidence = 29,
    #[msg("this verifier has already accused that client")]
    AlreadyAccused = 30,
    #[msg("the signer was evicted by its verifiers' evidence: join again once the next epoch starts")]
    Evicted = 31,

    // ---- program errors (6100..)
    #[msg("an authorization was granted to another signer")]
    SignerMismatch = 100,
    #[msg("the signer is not the run's main authority")]
    NotAuthority = 101,
    #[msg("the signer is not the run's join authority")]
    NotJoinAuthority = 102,
    #[msg("the run is permissioned and the signer has no join authorization")]
    NotAuthorized = 103,
    #[msg("the authorization belongs to another run")]
    AuthorizationMismatch = 104,
    #[msg("the coordinator account is not the run's")]
    WrongCoordinatorAccount = 105,
    #[msg("the coordinator account does not have the exact size")]
    AccountIncorrectSize = 106,
    #[msg("the coordinator account data is not 8-byte aligned")]
    AccountMisaligned = 107,
    #[msg("the coordinator account is already initialized")]
    AccountAlreadyInitialized = 108,
    #[msg("the run id must be 1 to 32 bytes")]
    RunIdInvalidLength = 109,
    #[msg("only a halted run (Uninitialized, Paused or Finished) can be freed")]
    CloseNotHalted = 110,
    #[msg("the signer is not a delegate of the contributor identity it joins as")]
    NotADelegate = 111,
    #[msg("a contributor lists at most 8 delegates")]
    TooManyDelegates = 112,
    #[msg("the contributor account is not the client slot's identity's")]
    WrongContributor = 113,
    #[msg("a run spec holds at most 8192 bytes")]
    RunSpecTooLarge = 114,
    #[msg("the run spec chunk ends past the spec's length")]
    RunSpecChunkOutOfRange = 115,
}

impl From<CoordinatorError> for CoordinatorProgramError {
    fn from(e: CoordinatorError) -> Self {
        use CoordinatorError as C;
        match e {
            C::Halted => Self::Halted,
            C::InvalidRunState => Self::InvalidRunState,
            C::NotAClient => Self::NotAClient,
            C::InvalidClientIndex => Self::InvalidClientIndex,
            C::AlreadyJoined => Self::AlreadyJoined,
            C::ClientsFull => Self::ClientsFull,
            C::MoreClientsThanBatches => Self::MoreClientsThanBatches,
            C::NotAWitness => Self::NotAWitness,
            C::DuplicateWitness => Self::DuplicateWitness,
            C::WitnessesFull => Self::WitnessesFull,
            C::MalformedBloom => Self::MalformedBloom,
            C::InvalidHealthCheck => Self::InvalidHealthCheck,
            C::InvalidWithdraw => Self::InvalidWithdraw,
            C::CannotResume => Self::CannotResume,
            C::NotACheckpointer => Self::NotACheckpointer,
            C::InvalidCheckpoint => Self::InvalidCheckpoint,
            C::CheckpointHashMismatch => Self::CheckpointHashMismatch,
            C::LayoutVersionMismatch => Self::LayoutVersionMismatch,
            C::UpdateNotHalted => Self::UpdateNotHalted,
            C::RunFinished => Self::RunFinished,
            C::InvalidConfig => Self::InvalidConfig,
            C::InvalidRunId => Self::InvalidRunId,
            C::InvalidOperation => Self::InvalidOperation,
            C::RunFull => Self::RunFull,
            C::WrongPhase => Self::WrongPhase,
            C::SyncHashMismatch => Self::SyncHashMismatch,
            C::PointsUnsettled => Self::PointsUnsettled,
            C::NothingToSettle => Self::NothingToSettle,
            C::NotAVerifier => Self::NotAVerifier,
            C::InvalidEvidence => Self::InvalidEvidence,
            C::AlreadyAccused => Self::AlreadyAccused,
            C::Evicted => Self::Evicted,
        }
    }
}

impl CoordinatorProgramError {
    /// The program's own errors (codes 6100..), in code order: the core's are
    /// `CoordinatorError::ALL` through `From`.
    pub const OWN: [Self; 14] = [
        Self::SignerMismatch,
        Self::NotAuthority,
        Self::NotJoinAuthority,
        Self::NotAuthorized,
        Self::AuthorizationMismatch,
        Self::WrongCoordinatorAccount,
        Self::AccountIncorrectSize,
        Self::AccountMisaligned,
        Self::AccountAlreadyInitialized,
        Self::RunIdInvalidLength,
        Self::CloseNotHalted,
        Self::NotADelegate,
        Self::TooManyDelegates,
        Self::WrongContributor,
    ];

    /// The on-chain error code (`ProgramError::Custom`): 6000 + the discriminant.
    pub fn code(self) -> u32 {
        u32::from(self)
    }
}
