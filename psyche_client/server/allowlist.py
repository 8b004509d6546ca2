"""Who may take part in a run on the centralized server: an allow-list of contributor
identities (ed25519 public keys), or nobody is refused (permissionless, the default).

The list names identities, what a run creator thinks in: the key whose points a join earns.
A join is allowed when the identity it joins as (its `identity` argument, else its signer) is
listed; so a node key that presents a valid delegation of a listed identity (delegation.py) may
join as that identity without being listed itself. Every other operation from a signer is
allowed when the signer, or the identity of the delegation its connection presented, is listed.
Refusals carry the server's code NotAllowed (protocol.py); the client exits on it.

File format: one key per line, 64 hex digits or base58 (Solana's spelling of the same 32
bytes); `#` starts a comment; blank lines are ignored."""

from pathlib import Path

B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
B58_INDEX = {c: i for i, c in enumerate(B58_ALPHABET)}


class AllowListError(ValueError):
    """A key or an allow-list file that cannot be read; names the file and line."""


def _b58decode(text: str) -> bytes:
    n = 0
    for c in text:
        if c not in B58_INDEX:
            raise ValueError(f"{c!r} is not a base58 digit")
        n = n * 58 + B58_INDEX[c]
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    zeros = len(text) - len(text.lstrip("1"))  # each leading '1' is a zero byte
    return b"\0" * zeros + body


def parse_key(text: str) -> bytes:
    """A 32-byte public key from 64 hex digits (either case) or base58."""
    text = text.strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text)
        except ValueError:
            pass  # 64 characters of base58 cannot be 32 bytes either: reported below
    if len(text) <= 44:  # a 32-byte key is at most 44 base58 digits
        try:
            raw = _b58decode(text)
        except ValueError:
            raw = b""
        if len(raw) == 32:
            return raw
    raise AllowListError(f"{text[:80]!r} is not a public key (64 hex digits or base58 of 32 "
                         "bytes)")


def parse_allow_file(text: str, name: str = "allow-list") -> set:
    keys = set()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            keys.add(parse_key(line))
        except AllowListError as e:
            raise AllowListError(f"{name}:{n}: {e}") from None
    return keys


class AllowList:
    """`path`: a file of keys (reloaded by `reload()`, which the server CLI calls on SIGHUP);
    `keys`: keys given directly (--allow-key), kept across reloads."""

    def __init__(self, path=None, keys=()):
        self.path = Path(path) if path is not None else None
        self.fixed = {parse_key(k) if isinstance(k, str) else bytes(k) for k in keys}
        self.from_file = set()
        if self.path is not None:
            self.reload()

    def reload(self) -> int:
        """Read the file again; raises AllowListError and keeps the old list when it cannot.
        Returns how many keys are allowed now."""
        if self.path is not None:
            try:
                text = self.path.read_text()
            except (OSError, UnicodeDecodeError) as e:
                raise AllowListError(f"{self.path}: cannot read the allow-list: {e}") from None
            self.from_file = parse_allow_file(text, str(self.path))
        return len(self)

    def __len__(self) -> int:
        return len(self.fixed | self.from_file)

    def __contains__(self, key: bytes) -> bool:
        return key in self.fixed or key in self.from_file
