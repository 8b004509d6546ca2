"""Off-chain delegations: a contributor identity lets a node key act for it in one run.

The identity (an ed25519 key, psyche_client.identity) signs DELEGATION_DOMAIN + run_id + NUL +
the delegate's public key; the client presents the delegation in its hello, and the server
checks the signature, the run and that the delegate is the connection's signer before it lets
that signer join as the identity (docs/points.md). The file is JSON:
{"run_id": str, "identity": hex32, "delegate": hex32, "signature": hex64}."""

import json
from dataclasses import dataclass
from pathlib import Path

from .identity import Identity, verify

DELEGATION_DOMAIN = b"psyche-delegation-v1\0"


class DelegationError(ValueError):
    pass


def delegation_message(run_id: str, delegate: bytes) -> bytes:
    return DELEGATION_DOMAIN + run_id.encode() + b"\0" + delegate


@dataclass(frozen=True)
class Delegation:
    run_id: str
    identity: bytes  # the contributor: its points go here
    delegate: bytes  # the node key that acts for it
    signature: bytes  # by `identity`

    @classmethod
    def sign(cls, identity: Identity, run_id: str, delegate: bytes) -> "Delegation":
        if len(delegate) != 32:
            raise DelegationError("a delegate is a 32-byte ed25519 public key")
        return cls(run_id, identity.public, delegate,
                   identity.sign(delegation_message(run_id, delegate)))

    def problem(self, run_id: str, signer: bytes):
        """Why this delegation does not let `signer` act for its identity in `run_id` (None:
        it does)."""
        if self.run_id != run_id:
            return f"the delegation is for run {self.run_id!r}, not {run_id!r}"
        if self.delegate != signer:
            return (f"the delegation is for node key {self.delegate.hex()[:16]}, not "
                    f"{signer.hex()[:16]}")
        if not verify(self.identity, delegation_message(self.run_id, self.delegate),
                      self.signature):
            return f"the delegation's signature is not identity {self.identity.hex()[:16]}'s"
        return None

    def to_json(self) -> dict:
        return {"run_id": self.run_id, "identity": self.identity.hex(),
                "delegate": self.delegate.hex(), "signature": self.signature.hex()}

    @classmethod
    def from_json(cls, data) -> "Delegation":
        try:
            d = cls(data["run_id"], bytes.fromhex(data["identity"]),
                    bytes.fromhex(data["delegate"]), bytes.fromhex(data["signature"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise DelegationError("a delegation needs run_id (string), identity and delegate "
                                  "(32-byte hex) and signature (64-byte hex)") from None
        if (not isinstance(d.run_id, str) or len(d.identity) != 32 or len(d.delegate) != 32
                or len(d.signature) != 64):
            raise DelegationError("a delegation needs run_id (string), identity and delegate "
                                  "(32-byte hex) and signature (64-byte hex)")
        return d

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path) -> "Delegation":
        try:
            return cls.from_json(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as e:
            if isinstance(e, DelegationError):
                raise DelegationError(f"{path}: {e}") from None
            raise DelegationError(f"{path}: not a delegation file: {e}") from None
