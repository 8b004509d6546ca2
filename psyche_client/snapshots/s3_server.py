"""A local S3-compatible server (versitygw, built by scripts/s3-server from the Go module
proxy) on loopback, for the tests, the benchmark and trying a run by hand. It writes an access
log, one line per request, which tests read to see what the server received."""

import contextlib
import re
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..local_servers import REPO, built_binary, started, stop
from .errors import SnapshotStoreError

SCRIPT = REPO / "scripts" / "s3-server"  # its --version names the pinned module (benchmarks)
ACCESS_KEY, SECRET_KEY = "psyche", "psyche-secret"
# after the bracketed time: ip, requester, request id, operation, key, uri, status
ACCESS_LINE = re.compile(r"\] (\S+) (\S+) (\S+) (\S+) (\S+) (\S+) (\d+) ")
# its output: "11:04:11 | vgw | 206 | 386.402µs | 127.0.0.1 | GET | /bucket/key | ..."
RESPONSE_LINE = re.compile(r"\| vgw \| (\d{3}) \|[^|]*\|[^|]*\| ([A-Z]+) \| (\S+) \|")


# checksum-derived ETags instead of MD5 ones: an MD5 of every byte is the server's largest cost
# on an upload, and nothing here reads ETags (blobs are checked by their SHA-256)
SERVER_OPTIONS = ("--data-integrity-etag",)


class S3ServerError(SnapshotStoreError):
    """The local S3 server could not be built or started."""


def find_binary() -> Path:
    """$PSYCHE_S3_SERVER_BIN if it exists, else the binary scripts/s3-server builds (once;
    a cached build is returned at once)."""
    return built_binary("s3-server", "PSYCHE_S3_SERVER_BIN", S3ServerError)


@dataclass(frozen=True)
class Request:
    requester: str   # the access key, or "-" for an anonymous request
    operation: str   # e.g. s3_UploadPart, s3_GetObject
    key: str
    status: int


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    data_dir: Path
    access_log: Path
    output: Path  # what it prints: one line per response, with its HTTP status
    process: subprocess.Popen = field(repr=False)

    @property
    def credentials(self):
        return (self.access_key, self.secret_key)

    def requests(self) -> list:
        """Every request the server has logged so far, in order."""
        try:
            text = self.access_log.read_text(errors="replace")
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            m = ACCESS_LINE.search(line)
            if m:
                _ip, requester, _id, op, key, _uri, status = m.groups()
                found.append(Request(requester, op, key, int(status)))
        return found

    def responses(self) -> list:
        """(HTTP status, method, path) of every response so far, from the server's output:
        a ranged read shows 206 there (the access log says 200)."""
        found = []
        for line in self.output.read_text(errors="replace").splitlines():
            m = RESPONSE_LINE.search(line)
            if m:
                found.append((int(m.group(1)), m.group(2), m.group(3)))
        return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def start_server(data_dir=None, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY,
                 timeout: float = 60.0, posix_options=SERVER_OPTIONS):
    """Yields an S3Server on a free loopback port, serving `data_dir` (default: a fresh
    temporary directory); stops it at exit. posix_options: more options of its posix backend
    (`versitygw posix --help`)."""
    binary = find_binary()
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="psyche-s3-"))
        root = Path(data_dir)
        (root / "buckets").mkdir(parents=True, exist_ok=True)
        output = ""
        for _ in range(3):  # another process can take the free port before the server binds it
            port = free_port()
            log, out = root / f"access-{port}.log", root / f"server-{port}.log"
            with open(out, "wb") as sink:
                proc = subprocess.Popen(
                    [str(binary), "--access", access_key, "--secret", secret_key,
                     "--port", f"127.0.0.1:{port}", "--access-log", str(log),
                     "posix", *posix_options, str(root / "buckets")],
                    stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if started(proc, lambda: _listening(port), timeout):
                try:
                    yield S3Server(f"http://127.0.0.1:{port}", access_key, secret_key, root, log,
                                   out, proc)
                finally:
                    stop(proc)
                return
            proc.kill()
            proc.wait()
            output = out.read_text(errors="replace")[-4000:]
        raise S3ServerError(f"the S3 server ({binary}) did not start within {timeout:.0f} s:\n"
                            f"{output}")
