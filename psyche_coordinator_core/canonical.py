"""Canonical bytes of the coordinator state: the exact layout of the on-chain account.

Fixed size, little-endian, every padding byte explicit and zero. Offsets (bytes):

  header   0..96     run_id[32] run_seed:u64 run_state_start:u64 epoch_start_timestamp:u64
                     epoch_start_data_index:u64 epoch:u32 step:u32 start_step:u32 last_step:u32
                     rounds_head:u32 clients_len:u16 pending_len:u16 run_state:u8 first_round:u8
                     pending_pause:u8 checkpoint_kind:u8 layout_version:u32
  config   96..208   see CONFIG_FORMAT (CONFIG_FIELDS in order, then 1 zero byte)
  repo     208..336  checkpoint_repo[64] checkpoint_revision[64]
  hashes   336..480  checkpoint_hash[32] param_hash[32] due_hash[32] spec_hash[32]
                     checkpoint_step:u32 param_step:u32 due_step:u32 _pad[4]
  clients  480..     [Client; 256]  signer[32] p2p_identity[32] identity[32] state:u8 phase:u8
                                    _pad[2] since:u32 presence:u64 sequences:u64
                                    accusers[32]   (bit i = client i, LSB first)
                                    bloom_bits:[u16; 8]   (168 each; the witness-bloom bit of
                                    each slice for the signer's hex, `bloom.bit_positions`:
                                    derived from the signer, written with it, checked on read)
  pending            [Client; 256]
  rounds             [Round; 4]  height:u32 participant_count:u16 witnesses_len:u16
                     data_index:u64 random_seed:u64 participants[32] warming[32]
                     accused[32]   (bit i = client i, LSB first)
                     [Witness; 32]  index:u16 _pad[6] broadcast_merkle[32] param_hash[32]
                                    participant_bloom[356] broadcast_bloom[356]   (784 each)

Unused client, round and witness slots are all zero. The state hash is SHA-256 of these bytes.
`layout_version` sits at offset 92 in every version from 2 on (version 1 had zero padding there),
so a reader can tell which layout it holds before decoding anything else."""

import hashlib
import struct

from .bloom import bit_positions, check_bloom_bytes
from .config import RunConfig
from .constants import (
    BLOOM_BYTES,
    LAYOUT_VERSION,
    MAX_CLIENTS,
    MAX_WITNESSES,
    NUM_STORED_ROUNDS,
    REPO_LEN,
    RUN_ID_LEN,
)
from .state import (
    Checkpoint,
    CheckpointKind,
    Client,
    ClientPhase,
    ClientState,
    CoordinatorState,
    Round,
    RunState,
    Witness,
)

HEADER_FORMAT = "<32sQQQQIIIIIHHBBBBI"
CONFIG_FORMAT = "<QQQQQQIIIHHHHHHHHBBBBQQQIHBx"
CONFIG_FIELDS = ("warmup_time", "cooldown_time", "max_round_train_time", "round_witness_time",
                 "epoch_time", "global_batch_size_warmup_tokens", "total_steps", "max_seq_len",
                 "checkpoint_interval", "min_clients", "init_min_clients", "witness_nodes",
                 "global_batch_size_start", "global_batch_size_end", "max_clients",
                 "max_syncing", "kept_rounds", "verification_percent", "checkpointer_percent",
                 "waiting_for_members_extra_time", "sync_warmup_rounds", "flops_per_token",
                 "tokens_per_compute_point", "points_cap", "presence_points", "evidence_quorum",
                 "verify_sample")
CLIENT_FORMAT = "<32s32s32sBBxxIQQ32s8H"
ROUND_HEAD_FORMAT = "<IHHQQ32s32s32s"
WITNESS_HEAD_FORMAT = "<H6x32s32s"
HASHES_FORMAT = "<32s32s32s32sIII4x"
VERSION_OFFSET = 92

HEADER_SIZE = struct.calcsize(HEADER_FORMAT)
CONFIG_SIZE = struct.calcsize(CONFIG_FORMAT)
CLIENT_SIZE = struct.calcsize(CLIENT_FORMAT)
WITNESS_SIZE = struct.calcsize(WITNESS_HEAD_FORMAT) + 2 * BLOOM_BYTES
ROUND_SIZE = struct.calcsize(ROUND_HEAD_FORMAT) + MAX_WITNESSES * WITNESS_SIZE

CONFIG_OFFSET = HEADER_SIZE
REPO_OFFSET = CONFIG_OFFSET + CONFIG_SIZE
HASHES_OFFSET = REPO_OFFSET + 2 * REPO_LEN
CLIENTS_OFFSET = HASHES_OFFSET + struct.calcsize(HASHES_FORMAT)
PENDING_OFFSET = CLIENTS_OFFSET + MAX_CLIENTS * CLIENT_SIZE
ROUNDS_OFFSET = PENDING_OFFSET + MAX_CLIENTS * CLIENT_SIZE
STATE_SIZE = ROUNDS_OFFSET + NUM_STORED_ROUNDS * ROUND_SIZE

assert (HEADER_SIZE, CONFIG_SIZE, CLIENT_SIZE, WITNESS_SIZE) == (96, 112, 168, 784)
assert (REPO_OFFSET, HASHES_OFFSET, CLIENTS_OFFSET) == (208, 336, 480)
assert ROUND_SIZE % 8 == 0 and STATE_SIZE == 187328


class LayoutError(ValueError):
    """Bytes that are not a valid coordinator state."""


def _fixed_str(text: str, size: int) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > size or b"\0" in raw:
        raise ValueError(f"{text!r} does not fit in {size} NUL-free bytes")
    return raw.ljust(size, b"\0")


def _read_str(raw: bytes) -> str:
    text = raw.rstrip(b"\0")
    if b"\0" in text:
        raise LayoutError("NUL inside a fixed string")
    return text.decode("utf-8")


def encode_config(config: RunConfig) -> bytes:
    return struct.pack(CONFIG_FORMAT, *(getattr(config, f) for f in CONFIG_FIELDS))


def _encode_client(c: Client) -> bytes:
    return struct.pack(CLIENT_FORMAT, c.signer, c.p2p_identity, c.identity, int(c.state),
                       int(c.phase), c.since, c.presence, c.sequences,
                       c.accusers.to_bytes(32, "little"), *bit_positions(c.signer.hex()))


def _encode_witness(w: Witness) -> bytes:
    return (struct.pack(WITNESS_HEAD_FORMAT, w.index, w.broadcast_merkle, w.param_hash)
            + w.participant_bloom + w.broadcast_bloom)


def _encode_round(r: Round) -> bytes:
    head = struct.pack(ROUND_HEAD_FORMAT, r.height, bin(r.participants).count("1"),
                       len(r.witnesses), r.data_index, r.random_seed,
                       r.participants.to_bytes(32, "little"), r.warming.to_bytes(32, "little"),
                       r.accused.to_bytes(32, "little"))
    body = b"".join(_encode_witness(w) for w in r.witnesses)
    return head + body.ljust(MAX_WITNESSES * WITNESS_SIZE, b"\0")


def to_bytes(s: CoordinatorState) -> bytes:
    header = struct.pack(
        HEADER_FORMAT, _fixed_str(s.run_id, RUN_ID_LEN), s.run_seed, s.run_state_start,
        s.epoch_start_timestamp, s.epoch_start_data_index, s.epoch, s.step, s.start_step,
        s.last_step, s.rounds_head, len(s.clients), len(s.pending), int(s.run_state),
        int(s.first_round), int(s.pending_pause), int(s.checkpoint.kind), s.layout_version)
    clients = b"".join(map(_encode_client, s.clients)).ljust(MAX_CLIENTS * CLIENT_SIZE, b"\0")
    pending = b"".join(map(_encode_client, s.pending)).ljust(MAX_CLIENTS * CLIENT_SIZE, b"\0")
    out = b"".join([header, encode_config(s.config),
                    _fixed_str(s.checkpoint.repo, REPO_LEN),
                    _fixed_str(s.checkpoint.revision, REPO_LEN),
                    struct.pack(HASHES_FORMAT, s.checkpoint.hash, s.param_hash, s.due_hash,
                                s.spec_hash, s.checkpoint.step, s.param_step, s.due_step),
                    clients, pending,
                    *map(_encode_round, s.rounds)])
    assert len(out) == STATE_SIZE
    return out


def state_hash(s: CoordinatorState) -> str:
    return hashlib.sha256(to_bytes(s)).hexdigest()


def _decode_clients(data: bytes, offset: int, count: int) -> list:
    if count > MAX_CLIENTS:
        raise LayoutError(f"client count {count} > {MAX_CLIENTS}")
    out = []
    for i in range(count):
        (signer, p2p, identity, state, phase, since, presence, sequences, accusers,
         *bits) = struct.unpack_from(CLIENT_FORMAT, data, offset + i * CLIENT_SIZE)
        if tuple(bits) != bit_positions(signer.hex()):
            raise LayoutError(f"client {i}: bloom bits {bits} are not its signer's")
        try:
            out.append(Client(signer, p2p, ClientState(state), ClientPhase(phase), since,
                              identity, presence, sequences, int.from_bytes(accusers, "little")))
        except ValueError as e:
            raise LayoutError(f"client {i}: {e}") from None
    return out


def _decode_round(data: bytes, offset: int) -> Round:
    (height, count, n_wit, data_index, seed, bitmap, warm,
     acc) = struct.unpack_from(ROUND_HEAD_FORMAT, data, offset)
    participants, warming = int.from_bytes(bitmap, "little"), int.from_bytes(warm, "little")
    accused = int.from_bytes(acc, "little")
    if (bin(participants).count("1") != count or n_wit > MAX_WITNESSES
            or warming & ~participants or accused & ~participants):
        raise LayoutError("round counts do not match its contents")
    witnesses, pos = [], offset + struct.calcsize(ROUND_HEAD_FORMAT)
    head = struct.calcsize(WITNESS_HEAD_FORMAT)
    for _ in range(n_wit):
        index, merkle, param_hash = struct.unpack_from(WITNESS_HEAD_FORMAT, data, pos)
        pb = data[pos + head:pos + head + BLOOM_BYTES]
        bb = data[pos + head + BLOOM_BYTES:pos + WITNESS_SIZE]
        try:
            witnesses.append(Witness(index, check_bloom_bytes(pb), check_bloom_bytes(bb), merkle,
                                     param_hash))
        except Exception as e:  # MalformedBloom
            raise LayoutError(str(e)) from None
        pos += WITNESS_SIZE
    return Round(height, data_index, seed, participants, warming, accused, witnesses)


def layout_version_of(data: bytes) -> int:
    """The layout version of account bytes (0 when too short to hold one)."""
    if len(data) < VERSION_OFFSET + 4:
        return 0
    version = struct.unpack_from("<I", data, VERSION_OFFSET)[0]
    return version or 1  # version 1 had zero padding at this offset


def from_bytes(data: bytes) -> CoordinatorState:
    """Decode and validate; raises LayoutError for bytes no valid state could have produced."""
    version = layout_version_of(data)
    if version != LAYOUT_VERSION:
        raise LayoutError(f"account layout version {version}, this code reads version "
                          f"{LAYOUT_VERSION}: upgrade the reader or migrate the account")
    if len(data) != STATE_SIZE:
        raise LayoutError(f"expected {STATE_SIZE} bytes, got {len(data)}")
    (run_id, run_seed, rs_start, ep_ts, ep_data, epoch, step, start_step, last_step, head,
     n_clients, n_pending, run_state, first_round, pending_pause, ck_kind,
     version) = struct.unpack_from(HEADER_FORMAT, data, 0)
    values = struct.unpack_from(CONFIG_FORMAT, data, CONFIG_OFFSET)
    ck_hash, param_hash, due_hash, spec_hash, ck_step, param_step, due_step = struct.unpack_from(
        HASHES_FORMAT, data, HASHES_OFFSET)
    try:
        config = RunConfig(**dict(zip(CONFIG_FIELDS, values))).validate()
        checkpoint = Checkpoint(CheckpointKind(ck_kind),
                                _read_str(data[REPO_OFFSET:REPO_OFFSET + REPO_LEN]),
                                _read_str(data[REPO_OFFSET + REPO_LEN:HASHES_OFFSET]),
                                ck_hash, ck_step)
        state = CoordinatorState(
            run_id=_read_str(run_id), config=config, run_seed=run_seed,
            run_state=RunState(run_state), run_state_start=rs_start, epoch=epoch, step=step,
            epoch_start_data_index=ep_data, epoch_start_timestamp=ep_ts, start_step=start_step,
            last_step=last_step, rounds_head=head, first_round=bool(first_round),
            pending_pause=bool(pending_pause), checkpoint=checkpoint, param_hash=param_hash,
            param_step=param_step, due_hash=due_hash, due_step=due_step, spec_hash=spec_hash,
            layout_version=version,
            clients=_decode_clients(data, CLIENTS_OFFSET, n_clients),
            pending=_decode_clients(data, PENDING_OFFSET, n_pending),
            rounds=[_decode_round(data, ROUNDS_OFFSET + i * ROUND_SIZE)
                    for i in range(NUM_STORED_ROUNDS)])
    except LayoutError:
        raise
    except (ValueError, UnicodeDecodeError) as e:
        raise LayoutError(str(e)) from None
    if head >= NUM_STORED_ROUNDS or first_round > 1 or pending_pause > 1:
        raise LayoutError("header flags out of range")
    if to_bytes(state) != bytes(data):
        raise LayoutError("non-canonical bytes (padding or unused slots not zero)")
    return state
