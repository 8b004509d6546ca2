"""Training results as they travel between peers: a payload with a commitment and a signature.

commitment = SHA-256(RESULT_DOMAIN || step u32 BE || batch start u64 BE || batch end u64 BE ||
payload); the trainer signs the 32-byte commitment with its ed25519 identity. A receiver checks
the payload's size, the signature, recomputes the commitment, and checks that the trainer was
assigned that batch."""

import hashlib
from dataclasses import dataclass

from psyche_coordinator_core import BatchId

from ..identity import Identity, verify

RESULT_DOMAIN = b"psyche-training-result"
# the decoder's limit (training/payload.py's MAX_PAYLOAD_BYTES: this module loads no torch; a
# test holds the two equal): a larger payload is refused before it is hashed. A client that knows
# its run's model refuses over that model's bound instead (ClientStateMachine.max_payload).
MAX_RESULT_BYTES = 1 << 30


def commitment_of(step: int, batch: BatchId, payload: bytes) -> bytes:
    h = hashlib.sha256(RESULT_DOMAIN + step.to_bytes(4, "big") + batch.start.to_bytes(8, "big")
                       + batch.end.to_bytes(8, "big"))
    h.update(payload)  # not concatenated: that would copy the payload once more
    return h.digest()


@dataclass(frozen=True)
class TrainingResult:
    step: int
    batch: BatchId
    trainer: bytes  # signer public key
    payload: bytes
    commitment: bytes
    signature: bytes

    @classmethod
    def create(cls, identity: Identity, step: int, batch: BatchId, payload: bytes):
        c = commitment_of(step, batch, payload)
        return cls(step, batch, identity.public, payload, c, identity.sign(c))

    def oversize(self, max_payload: int = MAX_RESULT_BYTES) -> str:
        """'' when the payload is at most `max_payload` bytes, else why not (nothing hashed)."""
        if len(self.payload) > max_payload:
            return f"a payload of {len(self.payload)} bytes, over the limit of {max_payload}"
        return ""

    def check(self, max_payload: int = MAX_RESULT_BYTES) -> str:
        """'' when the payload is at most `max_payload` bytes and the commitment and signature
        hold, else why not. The size comes first: a peer must not make us hash a gigabyte."""
        why = self.oversize(max_payload)
        if why:
            return why
        if commitment_of(self.step, self.batch, self.payload) != self.commitment:
            return "commitment does not match the payload"
        if not verify(self.trainer, self.commitment, self.signature):
            return "signature does not match the trainer"
        return ""

    def to_json(self) -> dict:
        return {"type": "result", "step": self.step, "batch": [self.batch.start, self.batch.end],
                "trainer": self.trainer.hex(), "payload": self.payload.hex(),
                "commitment": self.commitment.hex(), "signature": self.signature.hex()}

    @classmethod
    def from_json(cls, d: dict) -> "TrainingResult":
        """Raises ValueError on anything malformed."""
        try:
            start, end = d["batch"]
            if (not all(type(x) is int for x in (d["step"], start, end))
                    or not 0 <= start <= end < 1 << 64 or not 0 <= d["step"] < 1 << 32):
                raise ValueError  # the commitment holds the step as u32, the batch as u64s
            r = cls(d["step"], BatchId(start, end), bytes.fromhex(d["trainer"]),
                    bytes.fromhex(d["payload"]), bytes.fromhex(d["commitment"]),
                    bytes.fromhex(d["signature"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError("malformed training result") from None
        if len(r.trainer) != 32 or len(r.commitment) != 32 or len(r.signature) != 64:
            raise ValueError("malformed training result: key, commitment or signature size")
        return r


def merkle_root(items: list) -> bytes:
    """Leaves SHA-256(0x00 || item), nodes SHA-256(0x01 || left || right), odd levels repeat
    their last node; the empty list has the all-zero root."""
    if not items:
        return bytes(32)
    level = [hashlib.sha256(b"\0" + x).digest() for x in items]
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [hashlib.sha256(b"\1" + level[i] + level[i + 1]).digest()
                 for i in range(0, len(level), 2)]
    return level[0]


def dummy_payload(run_id: str, step: int, batch: BatchId) -> bytes:
    """Simulated training's deterministic result: what any honest trainer of this batch makes."""
    return hashlib.sha256(b"psyche-dummy" + run_id.encode() + step.to_bytes(4, "big")
                          + batch.start.to_bytes(8, "big") + batch.end.to_bytes(8, "big")).digest()
