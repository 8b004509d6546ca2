"""What an adversarial client does instead of the honest thing.

An attack sees the honest payload its client just trained (`Attack.payload`) and returns the bytes
it publishes; the harness signs them with the client's own key for the client's own step and
batch, so every result is validly signed and assigned: only the payload lies. `Attack.witness`
transforms the arguments of the client's witness operation (the hook for witness attacks; the
payload attacks leave it alone).

Payload attacks (names as `--attacks` takes them):

  noise      random values at the honest result's RMS per parameter (same indices): what norm
             clipping cannot see
  sign_flip  every value negated
  scale100   every value x100
  flip100    every value x(-100): the sign flip with the weight to decide every coefficient it
             picks under a plain mean (the worst case for mean aggregation)
  zeros      every value 0 (a free-rider: dilutes the mean)
  copy       another client's payload of the same step (an honest peer's, the lowest index that
             has published), re-signed for its own batch
  replay     the payload it published in the previous round, sent again re-signed for this step
             (its first round: the honest payload, not counted as an attack)
  malformed  20 random bytes
  nan        valid structure, every value NaN, +Inf or -Inf (fp32 or bf16 bit patterns; needs a
             config whose values are floats, not 1-bit signs)
  oversize   MAX_PAYLOAD_BYTES + 1 zero bytes: over the decoder's size limit (one shared buffer
             of calloc'd pages, so it costs no memory); receivers refuse it by its size,
             unhashed: only its sender hashes it, to sign it (about a second each time)

Witness attacks:

  lying_witness  honest results; every witness it sends commits a random parameter hash

And `sybil`: sign_flip, and each time it is removed it joins again with a fresh key.

Beyond the issue's list (not in the headline's min_detection_rate; its own headline figure):

  overlap_noise  what the verifier's overlap test lets through (training/judge.py): trains
                 honestly and keeps its true values where it sent coefficients in its previous
                 result too (the overlap, which a verifier can check), noise of the same size
                 everywhere else (its first trained step: honest, not counted)

Snapshot attack (the run gets a snapshot store, every client may checkpoint every 5 steps, and
an honest client with a fresh key joins half-way and loads its base from the recorded snapshot):

  poisoned_snapshot  trains honestly; every snapshot it stores has its parameters negated, and it
                     records it under the hash the witnesses agreed on (the only one the
                     coordinator accepts), so its copy can become the recorded one
"""

from __future__ import annotations

import random
import struct

import torch

from psyche_client.training.payload import (
    FLAG_RICE,
    MAX_PAYLOAD_BYTES,
    VAL_BF16,
    VAL_FP16,
    VAL_FP32,
    decode_payload,
    encode_payload,
)

_OVERSIZE = None


def value_spans(payload: bytes) -> list[tuple[int, int, int]]:
    """(start, end, value code) of each parameter's value bytes in a well-formed payload (the
    layout of payload.py's docstring)."""
    _, _, flags, _, count = struct.unpack_from("<4sBBHI", payload, 0)
    pos, out = 12, []
    for _ in range(count):
        ndim = payload[pos]
        pos += 1 + 4 * ndim
        code = payload[pos + 16]
        pos += 17
        if flags & FLAG_RICE:
            pos += 5
        idx_len, val_len = struct.unpack_from("<II", payload, pos)
        pos += 8 + idx_len
        out.append((pos, pos + val_len, code))
        pos += val_len
    if pos != len(payload):
        raise ValueError("value_spans: not a well-formed payload")
    return out


class Attack:
    name = "honest"
    needs_float_values = False

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)

    def payload(self, honest: bytes, ctx: dict) -> bytes | None:
        """The bytes to publish; None: publish the honest payload (not counted as attacked).
        ctx: step, batch, client (its index), rice (the spec's), peers ({client index: payload}
        of this step's results published so far by honest clients), previous (this client's
        honest payload of its previous trained step, or None)."""
        return None

    def witness(self, args: dict, ctx: dict) -> dict:
        """The witness operation's arguments this client sends (hook for witness attacks)."""
        return args

    def snapshot(self, files: dict, ctx: dict) -> dict | None:
        """The snapshot files this client stores instead of its honest ones ({name: bytes});
        None: the honest files. ctx: step, client."""
        return None


class _ValueAttack(Attack):
    """Decode the honest payload, change the values, encode again (same indices, same dtype)."""

    def change(self, values: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def payload(self, honest, ctx):
        params = decode_payload(honest)
        changed = []
        for sp in params:
            if sp.one_bit:
                raise ValueError(f"{self.name} needs float values (quantize_1bit = false)")
            v = self.change(sp.values.to(torch.float32)).to(sp.values.dtype)
            changed.append(type(sp)(sp.shape, sp.chunk, sp.indices, v))
        return encode_payload(changed, rice=ctx["rice"])


class Noise(_ValueAttack):
    name = "noise"
    needs_float_values = True

    def change(self, v):
        rms = float(v.pow(2).mean().sqrt())
        return torch.randn(v.shape, generator=self.gen) * rms


class SignFlip(_ValueAttack):
    name = "sign_flip"
    needs_float_values = True

    def change(self, v):
        return -v


class Scale100(_ValueAttack):
    name = "scale100"
    needs_float_values = True

    def change(self, v):
        return v * 100


class Flip100(_ValueAttack):
    name = "flip100"
    needs_float_values = True

    def change(self, v):
        return v * -100


class Zeros(_ValueAttack):
    name = "zeros"
    needs_float_values = True

    def change(self, v):
        return torch.zeros_like(v)


class Copy(Attack):
    name = "copy"

    def payload(self, honest, ctx):
        peers = ctx["peers"]
        if not peers:
            return None
        return peers[min(peers)]


class Replay(Attack):
    """Sends again the payload it published last round (its first round: the honest one)."""
    name = "replay"

    def __init__(self, seed: int):
        super().__init__(seed)
        self.sent = None

    def payload(self, honest, ctx):
        replayed, self.sent = self.sent, self.sent or honest
        return replayed


class Malformed(Attack):
    name = "malformed"

    def payload(self, honest, ctx):
        return self.rng.randbytes(20)


class NanInf(Attack):
    name = "nan"
    needs_float_values = True
    # per value code: NaN, +Inf, -Inf bit patterns
    PATTERNS = {VAL_FP32: ("<I", (0x7FC00000, 0x7F800000, 0xFF800000)),
                VAL_BF16: ("<H", (0x7FC0, 0x7F80, 0xFF80)),
                VAL_FP16: ("<H", (0x7E00, 0x7C00, 0xFC00))}

    def payload(self, honest, ctx):
        out = bytearray(honest)
        for start, end, code in value_spans(honest):
            if code not in self.PATTERNS:
                raise ValueError("nan needs float values (quantize_1bit = false)")
            fmt, bits = self.PATTERNS[code]
            size = struct.calcsize(fmt)
            for j, pos in enumerate(range(start, end, size)):
                struct.pack_into(fmt, out, pos, bits[j % 3])
        return bytes(out)


class Oversize(Attack):
    name = "oversize"

    def payload(self, honest, ctx):
        global _OVERSIZE
        if _OVERSIZE is None:
            _OVERSIZE = bytes(MAX_PAYLOAD_BYTES + 1)
        return _OVERSIZE


class LyingWitness(Attack):
    """Trains honestly; as a witness commits a parameter hash of its own making. Kept out when no
    lie ever becomes the agreed hash (a strict majority of witnesses must commit one hash)."""
    name = "lying_witness"

    def __init__(self, seed: int):
        super().__init__(seed)
        self.lies = set()

    def witness(self, args, ctx):
        lie = self.rng.randbytes(32)
        self.lies.add(lie)
        return {**args, "param_hash": lie}


class Sybil(SignFlip):
    """A sign-flipping adversary that, once removed, joins again at once with a fresh key (the
    harness makes the new client): what limits it is the join queue and sync (no result counts
    before it is Active), the verifiers' evidence again, and the points its slots forfeit."""
    name = "sybil"
    sybil = True


class PoisonedSnapshot(Attack):
    """Every snapshot it stores holds its parameters negated; the reported hash stays honest."""
    name = "poisoned_snapshot"
    late_joiner = True  # the run this attack needs: a store, snapshots, a joiner that loads one

    def snapshot(self, files, ctx):
        from safetensors.torch import load, save

        from psyche_client.training.stored import WEIGHTS_NAME
        tensors = {k: -v for k, v in load(files[WEIGHTS_NAME]).items()}
        return {**files, WEIGHTS_NAME: save(tensors, metadata={"format": "pt"})}


class OverlapNoise(Attack):
    name = "overlap_noise"
    needs_float_values = True
    extra = True  # beyond the list

    def payload(self, honest, ctx):
        if ctx.get("previous") is None:
            return None
        now, before = decode_payload(honest), decode_payload(ctx["previous"])
        changed = []
        for sp, old in zip(now, before):
            rows = torch.arange(sp.indices.shape[0]).unsqueeze(1) * sp.chunk[0] * sp.chunk[1]
            kept = torch.isin(sp.indices.to(torch.int64) + rows,
                              old.indices.to(torch.int64) + rows)
            v = sp.values.to(torch.float32)
            rms = float(v.pow(2).mean().sqrt())
            noise = torch.randn(v.shape, generator=self.gen) * rms
            changed.append(type(sp)(sp.shape, sp.chunk, sp.indices,
                                    torch.where(kept, v, noise).to(sp.values.dtype)))
        return encode_payload(changed, rice=ctx["rice"])


ATTACKS = {a.name: a for a in (Noise, SignFlip, Scale100, Flip100, Zeros, Copy, Replay,
                               Malformed, NanInf, Oversize, LyingWitness, Sybil,
                               PoisonedSnapshot, OverlapNoise)}
