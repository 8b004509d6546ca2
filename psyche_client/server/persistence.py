"""Durable coordinator state and points ledger: written atomically (temp file, fsync, rename)
before the server acknowledges anything that changed them, so a SIGKILL loses nothing that was
accepted and a settle is never counted twice (the slot's zeroed counters and the ledger entry
they went to are in the same file, written at once).

The file is the state's bytes (the layout's fixed size), then, when the ledger is not empty,
LEDGER_MAGIC and the ledger as JSON ({identity hex: Points fields}). A file of the state's
bytes alone (written before points existed) loads with an empty ledger."""

import json
import os
from pathlib import Path

from psyche_coordinator_core import (
    STATE_SIZE,
    CoordinatorState,
    LayoutError,
    from_bytes,
    to_bytes,
)

from ..ledger import ledger_from_json, ledger_to_json

STATE_FILE = "coordinator-state.bin"
LEDGER_MAGIC = b"\npsyche-ledger-v1\n"


def encode(state: CoordinatorState, ledger: dict = None) -> bytes:
    data = to_bytes(state)
    if ledger:
        data += LEDGER_MAGIC + json.dumps(ledger_to_json(ledger), sort_keys=True).encode()
    return data


def decode(data: bytes):
    """(state, ledger) from a saved file's bytes; LayoutError if they are not valid."""
    state = from_bytes(data[:STATE_SIZE])
    rest = data[STATE_SIZE:]
    if not rest:
        return state, {}
    if not rest.startswith(LEDGER_MAGIC):
        raise LayoutError(f"{len(rest)} bytes after the state are not a points ledger")
    try:
        return state, ledger_from_json(json.loads(rest[len(LEDGER_MAGIC):]))
    except (ValueError, UnicodeDecodeError) as e:
        raise LayoutError(f"the points ledger is not valid: {e}") from None


class StateStore:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / STATE_FILE

    def load_all(self):
        """(state, ledger) as saved, or (None, {}). A corrupt file is an error, never silently
        replaced."""
        if not self.path.exists():
            return None, {}
        try:
            return decode(self.path.read_bytes())
        except LayoutError as e:
            raise LayoutError(f"{self.path}: saved state is not valid ({e}); move it away to "
                              "start the run from state.toml") from None

    def load(self):
        """The saved state, or None."""
        return self.load_all()[0]

    def load_ledger(self) -> dict:
        return self.load_all()[1]

    def save(self, state: CoordinatorState, ledger: dict = None) -> None:
        """The state and the points ledger, together, atomically."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(encode(state, ledger))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
