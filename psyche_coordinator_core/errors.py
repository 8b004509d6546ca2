"""Named errors. The names are the contract: the Rust program returns the same name for the same
rejected operation, and the conformance vectors record it."""


class CoordinatorError(Exception):
    """An operation the coordinator refuses. `code` is the stable name."""

    CODES = (
        "Halted",
        "InvalidRunState",
        "NotAClient",
        "InvalidClientIndex",
        "AlreadyJoined",
        "ClientsFull",
        "MoreClientsThanBatches",
        "NotAWitness",
        "DuplicateWitness",
        "WitnessesFull",
        "MalformedBloom",
        "InvalidHealthCheck",
        "InvalidWithdraw",
        "CannotResume",
        "NotACheckpointer",
        "InvalidCheckpoint",
        "CheckpointHashMismatch",
        "LayoutVersionMismatch",
        "UpdateNotHalted",
        "RunFinished",
        "InvalidConfig",
        "InvalidRunId",
        "InvalidOperation",
        "RunFull",
        "WrongPhase",
        "SyncHashMismatch",
        "PointsUnsettled",
        "NothingToSettle",
        "NotAVerifier",
        "InvalidEvidence",
        "AlreadyAccused",
        "Evicted",
    )

    def __init__(self, code: str, detail: str = ""):
        assert code in self.CODES, code
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}" if detail else code)


class ConfigError(CoordinatorError):
    """A run config field out of range; names the field and what is allowed."""

    def __init__(self, field: str, allowed: str, value=None):
        self.field = field
        self.allowed = allowed
        self.value = value
        super().__init__("InvalidConfig", f"{field} = {value!r}: must be {allowed}")
