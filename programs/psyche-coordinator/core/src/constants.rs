//! Protocol limits (`constants.py`). Every number here is part of the on-chain layout.

/// Clients in one epoch, and joiners waiting for the next one.
pub const MAX_CLIENTS: usize = 256;
/// Witnesses stored per round.
pub const MAX_WITNESSES: usize = 32;
/// Ring of rounds: health checks look two rounds back.
pub const NUM_STORED_ROUNDS: usize = 4;
pub const RUN_ID_LEN: usize = 32;
/// Checkpoint repo id and revision, NUL-padded UTF-8.
pub const REPO_LEN: usize = 64;
pub const MERKLE_ROOT_LEN: usize = 32;
/// SHA-256 of a model's parameters (the client's parameter hash).
pub const PARAM_HASH_LEN: usize = 32;
pub const ZERO_HASH: [u8; PARAM_HASH_LEN] = [0; PARAM_HASH_LEN];

/// The account layout's version, stored in the header at [`VERSION_OFFSET`]. Bump it with any
/// change to the canonical bytes: code meeting another version stops (`LayoutVersionMismatch`)
/// instead of misreading the fields. 1: the layout before the version existed (those 4 bytes
/// were zero padding); 2: parameter hashes; 3: client phases (join mid-epoch, sync) and the
/// warming mask of a round; 4: points (each client's identity and unsettled presence and
/// sequences, the points settings); 5: evidence (each client's accusers mask, the config's
/// `evidence_quorum`, client state Evicted); 6: the rounds' accused mask (results a verifier
/// judged bad, left out of the round's apply); 7: the run spec's hash; 8: each client's
/// witness-bloom bits (its signer hashed once, when written, instead of every round).
pub const LAYOUT_VERSION: u32 = 8;
/// Where `layout_version` (u32 LE) sits in every layout from version 2 on.
pub const VERSION_OFFSET: usize = 92;
/// Signer and p2p identity keys.
pub const KEY_LEN: usize = 32;

/// Witness bloom filters: 8 slices of 353 bits (pybloom-live, capacity 256, error rate 0.005,
/// hashed with XXH3-128), small enough that a witness fits in one transaction.
pub const BLOOM_CAPACITY: usize = 256;
pub const BLOOM_SLICES: usize = 8;
pub const BLOOM_BITS_PER_SLICE: usize = 353;
pub const BLOOM_BITS: usize = BLOOM_SLICES * BLOOM_BITS_PER_SLICE; // 2824 = 353 bytes
/// 353 bytes of bits and 3 zero padding bytes, so witnesses stay 8-byte aligned.
pub const BLOOM_BYTES: usize = 356;

/// The most rounds a synced client trains before its results count (`sync_warmup_rounds`).
pub const MAX_SYNC_WARMUP_ROUNDS: u8 = 32;

/// Bounds that keep integer arithmetic inside u64 (no u128 on chain).
pub const MAX_WARMUP_TOKENS: u64 = 1 << 44;
/// Any single duration in the config.
pub const MAX_TIME_SECONDS: u64 = 1 << 32;
/// 280 TFLOPs per token: a model of ~47 trillion parameters.
pub const MAX_FLOPS_PER_TOKEN: u64 = 1 << 48;
/// Node keys that may act for one contributor identity (the contributor account's list).
pub const MAX_DELEGATES: usize = 8;
/// `now` must be below this (`apply` in coordinator.py).
pub const MAX_TIME: u64 = 1 << 63;

pub const WITNESS_SALT: &[u8] = b"witness";
pub const COMMITTEE_SALT: &[u8] = b"committee";
pub const CHECKPOINTER_SALT: &[u8] = b"checkpointer";
pub const ROUND_SEED_DOMAIN: &[u8] = b"psyche-round-seed";

/// Trainers one elected verifier judges per round at most (`verification_sample`): its evidence
/// may name only those, which bounds how many honest results one lying verifier leaves out.
pub const VERIFY_SAMPLE: usize = 3;

/// Seed mixed into the verifier order (`assign_verifications`).
pub const VERIFY_SEED_XOR: u64 = 0x5645_5249_4659_0000;

/// Byte sizes of the canonical layout (`canonical.py`).
pub const HEADER_SIZE: usize = 96;
pub const CONFIG_SIZE: usize = 112;
/// checkpoint_hash, param_hash, due_hash, spec_hash, three steps and 4 bytes of padding.
pub const HASHES_SIZE: usize = 4 * PARAM_HASH_LEN + 16;
pub const CLIENT_SIZE: usize = 168;
pub const WITNESS_SIZE: usize = 784;
pub const ROUND_SIZE: usize = 25_208;
pub const STATE_SIZE: usize = 187_328;

pub const CONFIG_OFFSET: usize = HEADER_SIZE;
pub const REPO_OFFSET: usize = CONFIG_OFFSET + CONFIG_SIZE;
pub const HASHES_OFFSET: usize = REPO_OFFSET + 2 * REPO_LEN;
pub const CLIENTS_OFFSET: usize = HASHES_OFFSET + HASHES_SIZE;
pub const PENDING_OFFSET: usize = CLIENTS_OFFSET + MAX_CLIENTS * CLIENT_SIZE;
pub const ROUNDS_OFFSET: usize = PENDING_OFFSET + MAX_CLIENTS * CLIENT_SIZE;

const _: () = assert!(BLOOM_BITS == 2824 && BLOOM_BYTES == BLOOM_BITS / 8 + 3);
const _: () = assert!(REPO_OFFSET == 208 && HASHES_OFFSET == 336 && CLIENTS_OFFSET == 480);
const _: () = assert!(VERSION_OFFSET + 4 == HEADER_SIZE);
const _: () = assert!(ROUNDS_OFFSET + NUM_STORED_ROUNDS * ROUND_SIZE == STATE_SIZE);
