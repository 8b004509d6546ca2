"""What a client needs from a coordinator backend, whatever it runs on (server or chain)."""

from typing import Protocol


class BackendError(Exception):
    """The backend could not be reached or answered nonsense; the operation may be retried."""


class FatalBackendError(BackendError):
    """Retrying cannot help (no such run, wrong run id, not allowed to join)."""


class Backend(Protocol):
    async def connect(self) -> None:
        """Connect and authenticate; raises BackendError."""

    async def spec(self):
        """The run's training spec (model, optimizer, data) as a dict, or None: simulate."""

    async def next_state(self):
        """Wait for and return the newest coordinator state not yet returned."""

    async def send(self, op: str, args: dict) -> None:
        """Submit an operation. Raises CoordinatorError when the coordinator rejects it, or
        BackendError when it could not be delivered."""

    def peers(self) -> dict:
        """p2p identity hex -> address of the run's other clients, where the backend knows."""

    async def close(self) -> None: ...
