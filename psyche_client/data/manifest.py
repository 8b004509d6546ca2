"""What the run's data is, not only where it is: a manifest of SHA-256 hashes over fixed-size
chunks of every token file, whose own hash the run spec pins ([data] manifest_sha256).

A dataset can be far too large to hash before training, and a client reads only the sequences
its batches name, from anywhere in it. So every file is cut into chunks of `chunk_bytes` (the
last one shorter), each hashed on its own; a client hashes a chunk the first time it reads from
it and refuses the data (DataHashMismatch) when the hash differs. A client reads whole chunks
over HTTP for that: a sequence of 2048 u32 tokens (8 KiB) costs one 64 KiB chunk at the
default size.

Files are named by their path relative to the manifest's own directory (or URL), with "/":
`train/tokens-000.bin` beside `heldout/tokens-000.bin`. The manifest is canonical JSON (sorted
keys, no spaces), so the same files and chunk size always give the same bytes and hash."""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .fetch import TooLarge, get_bytes
from .provider import DataError

FORMAT = "psyche-data-manifest/1"
DEFAULT_CHUNK_BYTES = 64 << 10
MANIFEST_NAME = "manifest.json"  # what `psyche-data tokenize` and `psyche-data manifest` write
MAX_MANIFEST_BYTES = 256 << 20  # 4 M chunks: 256 GiB of tokens at the default chunk size


class ManifestError(DataError):
    """The manifest cannot be read, is not one, or does not list a file the run reads."""


class ManifestUnreachable(ManifestError):
    """The manifest could not be read (network, missing file)."""


class DataHashMismatch(DataError):
    """Data differs from what the run's manifest says: another file, or changed bytes."""


@dataclass(frozen=True)
class FileHashes:
    name: str
    size: int
    chunks: tuple  # 32-byte SHA-256 digests, one per chunk


@dataclass(frozen=True)
class Manifest:
    chunk_bytes: int
    files: dict  # name -> FileHashes

    def to_bytes(self) -> bytes:
        doc = {"format": FORMAT, "chunk_bytes": self.chunk_bytes,
               "files": {f.name: {"size": f.size, "chunks": "".join(c.hex() for c in f.chunks)}
                         for f in self.files.values()}}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def sha256(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()

    def file(self, name: str) -> FileHashes:
        try:
            return self.files[name]
        except KeyError:
            raise ManifestError(f"{name} is not in the data manifest (it lists "
                                f"{', '.join(sorted(self.files)) or 'no files'})") from None


def parse_manifest(raw: bytes, expected_sha256: str = None) -> Manifest:
    """The manifest in `raw`; with `expected_sha256`, refused unless raw hashes to it (checked
    before anything is parsed)."""
    if expected_sha256 is not None and hashlib.sha256(raw).hexdigest() != expected_sha256.lower():
        raise DataHashMismatch(f"the data manifest hashes to {hashlib.sha256(raw).hexdigest()}, "
                               f"not the run's {expected_sha256}: it is another dataset's or "
                               "was changed")
    try:
        doc = json.loads(raw)
        if doc.get("format") != FORMAT:
            raise ManifestError(f"not a data manifest (format {doc.get('format')!r}, "
                                f"expected {FORMAT!r})")
        chunk = doc["chunk_bytes"]
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError("chunk_bytes must be a positive integer")
        files = {}
        for name, f in doc["files"].items():
            size, hexes = f["size"], f["chunks"]
            if not isinstance(size, int) or size < 0 or not isinstance(hexes, str):
                raise ValueError(f"{name}: bad size or chunks")
            digests = bytes.fromhex(hexes)
            if len(digests) != 32 * -(-size // chunk):
                raise ValueError(f"{name}: {len(digests) // 32} chunk hashes for {size} bytes")
            files[name] = FileHashes(name, size, tuple(digests[i:i + 32]
                                                       for i in range(0, len(digests), 32)))
    except ManifestError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ManifestError(f"malformed data manifest: {e}") from None
    return Manifest(chunk, files)


def hash_file(path: Path, name: str, chunk_bytes: int) -> FileHashes:
    chunks, size = [], 0
    with open(path, "rb") as f:
        while block := f.read(chunk_bytes):
            chunks.append(hashlib.sha256(block).digest())
            size += len(block)
    return FileHashes(name, size, tuple(chunks))


def build_manifest(root, paths, chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress=None) -> Manifest:
    """The manifest of `paths`, each named relative to `root` (the manifest's directory);
    progress(name, bytes) after each file."""
    if chunk_bytes < 1:
        raise ManifestError("chunk_bytes must be at least 1")
    root, files = Path(root).resolve(), {}
    for p in paths:
        p = Path(p).resolve()
        try:
            name = p.relative_to(root).as_posix()
        except ValueError:
            raise ManifestError(f"{p} is outside {root}: a manifest lists files in its own "
                                "directory and below") from None
        files[name] = hash_file(p, name, chunk_bytes)
        if progress:
            progress(name, files[name].size)
    return Manifest(chunk_bytes, files)


class ChunkCheck:
    """Reads of one file's byte ranges, checked against its hashes a chunk at a time.

    `read(a, b)` returns the file's bytes a..b-1 (the provider's own read: a memory map, an HTTP
    range). With `remember` (a local file), chunks that checked are not hashed again; bytes that
    come over the network are checked every time they come."""

    def __init__(self, hashes: FileHashes, chunk_bytes: int, read, where: str, remember=False):
        self.hashes, self.chunk, self.read, self.where = hashes, chunk_bytes, read, where
        self.remember, self.checked = remember, set()

    def check_size(self, size: int) -> None:
        if size != self.hashes.size:
            raise DataHashMismatch(f"{self.where}: {size} bytes, but the run's data manifest "
                                   f"says {self.hashes.name} has {self.hashes.size}")

    def bytes(self, a: int, b: int) -> bytes:
        """Bytes a..b-1, from chunks that all match their hashes."""
        if not 0 <= a <= b <= self.hashes.size:
            raise DataError(f"{self.where}: bytes {a}..{b} outside its {self.hashes.size}")
        if a == b:
            return b""
        first, last = a // self.chunk, (b - 1) // self.chunk
        if all(c in self.checked for c in range(first, last + 1)):
            return self.read(a, b)
        lo, hi = first * self.chunk, min((last + 1) * self.chunk, self.hashes.size)
        data = self.read(lo, hi)
        for c in range(first, last + 1):
            part = data[(c - first) * self.chunk:(c - first + 1) * self.chunk]
            if hashlib.sha256(part).digest() != self.hashes.chunks[c]:
                raise DataHashMismatch(
                    f"{self.where}: bytes {c * self.chunk}..{c * self.chunk + len(part)} differ "
                    f"from the run's data manifest ({self.hashes.name}, chunk {c})")
            if self.remember:
                self.checked.add(c)
        return data[a - lo:b - lo]


def read_manifest(location: str) -> bytes:
    """The bytes at `location` (an http(s) URL or a path), at most MAX_MANIFEST_BYTES."""
    if location.startswith(("http://", "https://")):
        try:
            return get_bytes(location, MAX_MANIFEST_BYTES)
        except TooLarge as e:
            raise ManifestError(str(e)) from None
        except DataError as e:
            raise ManifestUnreachable(f"cannot read the data manifest: {e}") from None
    try:
        with open(location, "rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise ManifestUnreachable(f"cannot read the data manifest {location}: {e}") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{location}: over {MAX_MANIFEST_BYTES} bytes")
    return raw


def load_manifest(location: str, sha256: str) -> Manifest:
    """The manifest at `location`, refused unless it hashes to `sha256`."""
    return parse_manifest(read_manifest(location), sha256)


def manifest_name(location: str, file: str) -> str:
    """The name the manifest at `location` gives `file` (a URL or path of a token file): its
    path relative to the manifest's directory."""
    if location.startswith(("http://", "https://")):
        from urllib.parse import unquote
        base = location.rsplit("/", 1)[0] + "/"
        if not file.startswith(base):
            raise ManifestError(f"{file} is not under {base}, where the data manifest is")
        return unquote(file[len(base):].split("?", 1)[0])
    base = Path(location).resolve().parent
    try:
        return Path(file).resolve().relative_to(base).as_posix()
    except ValueError:
        raise ManifestError(f"{file} is not under {base}, where the data manifest is") from None
