"""A client's ed25519 identity: signs its operations and its training results.

The secret key file holds the 32-byte seed, raw (`openssl rand 32 > secret.key`) or as 64 hex
characters; RAW_IDENTITY_SECRET_KEY may hold the hex instead."""

import os
from pathlib import Path

import nacl.exceptions
import nacl.signing


class IdentityError(ValueError):
    pass


class Identity:
    def __init__(self, seed: bytes):
        if len(seed) != 32:
            raise IdentityError("an identity secret key is exactly 32 bytes")
        self._key = nacl.signing.SigningKey(seed)
        self.public = bytes(self._key.verify_key)

    @classmethod
    def generate(cls) -> "Identity":
        return cls(os.urandom(32))

    @classmethod
    def load(cls, path=None, env=os.environ) -> "Identity":
        """From a file, else RAW_IDENTITY_SECRET_KEY, else a fresh random identity."""
        if path:
            raw = Path(path).read_bytes()
            text = raw.strip()
            if len(raw) == 32:
                return cls(raw)
            try:
                return cls(bytes.fromhex(text.decode()))
            except (ValueError, UnicodeDecodeError):
                raise IdentityError(f"{path}: expected 32 raw bytes or 64 hex characters") from None
        if env.get("RAW_IDENTITY_SECRET_KEY"):
            try:
                return cls(bytes.fromhex(env["RAW_IDENTITY_SECRET_KEY"].strip()))
            except ValueError:
                raise IdentityError("RAW_IDENTITY_SECRET_KEY: expected 64 hex characters") from None
        return cls.generate()

    def save(self, path) -> None:
        p = Path(path)
        p.write_bytes(bytes(self._key))
        p.chmod(0o600)

    @property
    def seed(self) -> bytes:
        """The 32-byte secret seed (also the client's iroh endpoint key)."""
        return bytes(self._key)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message).signature


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    try:
        nacl.signing.VerifyKey(public).verify(message, signature)
        return True
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        return False
