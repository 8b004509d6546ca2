//! Named errors (`errors.py`). The variant names are the contract: they equal the Python codes.

use core::fmt;

#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoordinatorError {
    Halted = 0,
    InvalidRunState = 1,
    NotAClient = 2,
    InvalidClientIndex = 3,
    AlreadyJoined = 4,
    ClientsFull = 5,
    MoreClientsThanBatches = 6,
    NotAWitness = 7,
    DuplicateWitness = 8,
    WitnessesFull = 9,
    MalformedBloom = 10,
    InvalidHealthCheck = 11,
    InvalidWithdraw = 12,
    CannotResume = 13,
    NotACheckpointer = 14,
    InvalidCheckpoint = 15,
    CheckpointHashMismatch = 16,
    LayoutVersionMismatch = 17,
    UpdateNotHalted = 18,
    RunFinished = 19,
    InvalidConfig = 20,
    InvalidRunId = 21,
    InvalidOperation = 22,
    RunFull = 23,
    WrongPhase = 24,
    SyncHashMismatch = 25,
    PointsUnsettled = 26,
    NothingToSettle = 27,
    NotAVerifier = 28,
    InvalidEvidence = 29,
    AlreadyAccused = 30,
    Evicted = 31,
}

impl CoordinatorError {
    /// Every code, in the order of `CoordinatorError.CODES`.
    pub const ALL: [CoordinatorError; 32] = [
        Self::Halted,
        Self::InvalidRunState,
        Self::NotAClient,
        Self::InvalidClientIndex,
        Self::AlreadyJoined,
        Self::ClientsFull,
        Self::MoreClientsThanBatches,
        Self::NotAWitness,
        Self::DuplicateWitness,
        Self::WitnessesFull,
        Self::MalformedBloom,
        Self::InvalidHealthCheck,
        Self::InvalidWithdraw,
        Self::CannotResume,
        Self::NotACheckpointer,
        Self::InvalidCheckpoint,
        Self::CheckpointHashMismatch,
        Self::LayoutVersionMismatch,
        Self::UpdateNotHalted,
        Self::RunFinished,
        Self::InvalidConfig,
        Self::InvalidRunId,
        Self::InvalidOperation,
        Self::RunFull,
        Self::WrongPhase,
        Self::SyncHashMismatch,
        Self::PointsUnsettled,
        Self::NothingToSettle,
        Self::NotAVerifier,
        Self::InvalidEvidence,
        Self::AlreadyAccused,
        Self::Evicted,
    ];

    /// The stable name, as recorded in the conformance vectors.
    pub const fn code(self) -> &'static str {
        match self {
            Self::Halted => "Halted",
            Self::InvalidRunState => "InvalidRunState",
            Self::NotAClient => "NotAClient",
            Self::InvalidClientIndex => "InvalidClientIndex",
            Self::AlreadyJoined => "AlreadyJoined",
            Self::ClientsFull => "ClientsFull",
            Self::MoreClientsThanBatches => "MoreClientsThanBatches",
            Self::NotAWitness => "NotAWitness",
            Self::DuplicateWitness => "DuplicateWitness",
            Self::WitnessesFull => "WitnessesFull",
            Self::MalformedBloom => "MalformedBloom",
            Self::InvalidHealthCheck => "InvalidHealthCheck",
            Self::InvalidWithdraw => "InvalidWithdraw",
            Self::CannotResume => "CannotResume",
            Self::NotACheckpointer => "NotACheckpointer",
            Self::InvalidCheckpoint => "InvalidCheckpoint",
            Self::CheckpointHashMismatch => "CheckpointHashMismatch",
            Self::LayoutVersionMismatch => "LayoutVersionMismatch",
            Self::UpdateNotHalted => "UpdateNotHalted",
            Self::RunFinished => "RunFinished",
            Self::InvalidConfig => "InvalidConfig",
            Self::InvalidRunId => "InvalidRunId",
            Self::InvalidOperation => "InvalidOperation",
            Self::RunFull => "RunFull",
            Self::WrongPhase => "WrongPhase",
            Self::SyncHashMismatch => "SyncHashMismatch",
            Self::PointsUnsettled => "PointsUnsettled",
            Self::NothingToSettle => "NothingToSettle",
            Self::NotAVerifier => "NotAVerifier",
            Self::InvalidEvidence => "InvalidEvidence",
            Self::AlreadyAccused => "AlreadyAccused",
            Self::Evicted => "Evicted",
        }
    }

    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|e| e.code() == code)
    }
}

impl fmt::Display for CoordinatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_discriminants() {
        for (i, e) in CoordinatorError::ALL.iter().enumerate() {
            assert_eq!(*e as u32, i as u32);
            assert_eq!(CoordinatorError::from_code(e.code()), Some(*e));
            assert_eq!(format!("{e:?}"), e.code());
        }
        assert_eq!(CoordinatorError::from_code("Nope"), None);
    }
}
