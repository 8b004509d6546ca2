"""Solana JSON keypair files (the Solana CLI's format: a JSON list of 64 byte values, the
32-byte ed25519 seed then the public key).

A client's Solana keypair is also its p2p identity: both are ed25519, so the seed that signs its
transactions signs its training results, and its endpoint id is its pubkey."""

import json
import os
from pathlib import Path

from solders.keypair import Keypair

from ..identity import Identity


class KeypairError(ValueError):
    pass


def load_keypair(path) -> Keypair:
    p = Path(path).expanduser()
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise KeypairError(f"{p}: no such keypair file (create one with `psyche-solana-client "
                           f"new-keypair {p}` or `solana-keygen new -o {p}`)") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise KeypairError(f"{p}: not a Solana keypair file (a JSON list of 64 bytes)") from None
    if (not isinstance(raw, list) or len(raw) != 64
            or not all(isinstance(b, int) and 0 <= b < 256 for b in raw)):
        raise KeypairError(f"{p}: a Solana keypair file holds a JSON list of 64 integers 0-255")
    try:
        return Keypair.from_bytes(bytes(raw))
    except ValueError as e:
        raise KeypairError(f"{p}: invalid keypair: {e}") from None


def save_keypair(kp: Keypair, path, overwrite=False) -> Path:
    p = Path(path).expanduser()
    if p.exists() and not overwrite:
        raise KeypairError(f"{p} exists; refusing to overwrite a key")
    p.parent.mkdir(parents=True, exist_ok=True)
    # Written private from the start: the file is a secret key.
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(list(bytes(kp)), f)
    return p


def identity_of(kp: Keypair) -> Identity:
    """The p2p identity (signing results) of a Solana keypair: the same ed25519 key."""
    return Identity(bytes(kp)[:32])
