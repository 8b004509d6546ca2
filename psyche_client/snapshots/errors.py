"""The snapshot store's named errors. Each carries a message meant for the person running the
client: callers print it and stop, without a stack trace."""


class SnapshotStoreError(RuntimeError):
    """Any failure of the snapshot store that a caller is expected to meet."""


class InvalidStoreUrl(SnapshotStoreError):
    """The store's URL (or endpoint) is not one this module can open."""


class ManifestInvalid(SnapshotStoreError):
    """A manifest's fields or bytes do not follow the format."""


class ManifestFormatUnsupported(ManifestInvalid):
    """A manifest of another format version (a release that writes snapshots differently)."""


class SnapshotNotFound(SnapshotStoreError):
    """No snapshot (or no bucket, or no blob it names) at that location."""


class SnapshotCorrupt(SnapshotStoreError):
    """Bytes whose SHA-256 differs from what the manifest (or the location) says."""


class StoreAccessDenied(SnapshotStoreError):
    """The store refused the request: writing without (valid) credentials, or a private bucket."""


class StoreUnreachable(SnapshotStoreError):
    """The store's endpoint could not be reached."""
