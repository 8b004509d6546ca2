"""A snapshot's manifest: which run, epoch and step it is, the agreed parameter hash, and the
SHA-256 and size of every file. Its canonical bytes (sorted keys, no spaces) are hashed to give
the snapshot's location, so a location names exactly one snapshot and fits the coordinator's
64-byte checkpoint repo field."""

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from psyche_coordinator_core.ops_json import loads as read_json

from .errors import ManifestFormatUnsupported, ManifestInvalid

MANIFEST_NAME = "manifest.json"
FORMAT = 1
HEX64 = re.compile(r"[0-9a-f]{64}")  # fullmatch only: `$` would let a trailing newline by
# a snapshot's files sit side by side in one directory: plain names only
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
HASH_CHUNK = 1 << 20


def is_location(text: str) -> bool:
    return bool(HEX64.fullmatch(text))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    size: int


@dataclass(frozen=True)
class Manifest:
    run_id: str
    epoch: int
    step: int
    param_hash: str  # 64 hex: the parameters' hash the witness quorum agreed on
    files: dict = field(default_factory=dict)  # name -> FileEntry

    def __post_init__(self):
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ManifestInvalid("manifest: run_id must be a non-empty string")
        for name in ("epoch", "step"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ManifestInvalid(f"manifest: {name} must be a non-negative integer, not {v!r}")
        if not isinstance(self.param_hash, str) or not HEX64.fullmatch(self.param_hash):
            raise ManifestInvalid("manifest: param_hash must be 64 lowercase hex digits, "
                                  f"not {self.param_hash!r}")
        if not self.files:
            raise ManifestInvalid("manifest: a snapshot has at least one file")
        for name, entry in self.files.items():
            if not FILE_NAME.fullmatch(name) or name == MANIFEST_NAME:
                raise ManifestInvalid(f"manifest: {name!r} is not a valid snapshot file name")
            if not isinstance(entry, FileEntry) or not isinstance(entry.sha256, str) or \
                    not HEX64.fullmatch(entry.sha256) or \
                    type(entry.size) is not int or entry.size < 0:
                raise ManifestInvalid(f"manifest: the entry of {name!r} needs a 64-hex sha256 "
                                      "and a non-negative size")

    def to_bytes(self) -> bytes:
        doc = {"format": FORMAT, "run_id": self.run_id, "epoch": self.epoch, "step": self.step,
               "param_hash": self.param_hash,
               "files": {n: {"sha256": e.sha256, "size": e.size} for n, e in self.files.items()}}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()

    @property
    def location(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()

    @property
    def total_size(self) -> int:
        return sum(e.size for e in self.files.values())

    @classmethod
    def from_bytes(cls, data: bytes) -> "Manifest":
        """Parses and validates; the bytes must be canonical, so that they hash to the
        location they were stored under."""
        try:
            doc = read_json(data)
        except ValueError as e:  # MalformedJson
            raise ManifestInvalid(f"manifest: not JSON ({e})") from None
        version = doc.get("format") if isinstance(doc, dict) else None
        if type(version) is int and version != FORMAT:
            raise ManifestFormatUnsupported(f"manifest: format {version}; this release reads "
                                            f"format {FORMAT} only")
        if version != FORMAT:
            raise ManifestInvalid(f"manifest: expected format {FORMAT}, got "
                                  f"{doc.get('format') if isinstance(doc, dict) else doc!r}")
        want = {"format", "run_id", "epoch", "step", "param_hash", "files"}
        if set(doc) != want:
            raise ManifestInvalid(f"manifest: fields {sorted(doc)}, expected {sorted(want)}")
        files = doc["files"]
        if not isinstance(files, dict) or not all(
                isinstance(e, dict) and set(e) == {"sha256", "size"} for e in files.values()):
            raise ManifestInvalid("manifest: files must map names to {sha256, size}")
        m = cls(doc["run_id"], doc["epoch"], doc["step"], doc["param_hash"],
                {n: FileEntry(e["sha256"], e["size"]) for n, e in files.items()})
        if m.to_bytes() != data:
            raise ManifestInvalid("manifest: bytes are not in canonical form (sorted keys, "
                                  "compact separators)")
        return m

    @classmethod
    def read(cls, snapshot_dir: Path) -> "Manifest":
        path = Path(snapshot_dir) / MANIFEST_NAME
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ManifestInvalid(f"{snapshot_dir} is not a snapshot: it has no "
                                  f"{MANIFEST_NAME}") from None
        return cls.from_bytes(data)
