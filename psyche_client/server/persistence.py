"""Durable coordinator state: written atomically (temp file, fsync, rename) before the server
acknowledges anything that changed it, so a SIGKILL loses nothing that was accepted."""

import os
from pathlib import Path

from psyche_coordinator_core import CoordinatorState, LayoutError, from_bytes, to_bytes

STATE_FILE = "coordinator-state.bin"


class StateStore:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / STATE_FILE

    def load(self):
        """The saved state, or None. A corrupt file is an error, never silently replaced."""
        if not self.path.exists():
            return None
        try:
            return from_bytes(self.path.read_bytes())
        except LayoutError as e:
            raise LayoutError(f"{self.path}: saved state is not valid ({e}); move it away to "
                              "start the run from state.toml") from None

    def save(self, state: CoordinatorState) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(to_bytes(state))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
