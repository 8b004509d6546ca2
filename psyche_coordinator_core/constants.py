"""Protocol limits. Every number here is part of the on-chain layout: change one and the Rust
program, the conformance vectors and the account size all change with it."""

MAX_CLIENTS = 256  # clients in one epoch, and joiners waiting for the next one
MAX_WITNESSES = 32  # witnesses stored per round
NUM_STORED_ROUNDS = 4  # ring of rounds: health checks look two rounds back
RUN_ID_LEN = 32
REPO_LEN = 64  # checkpoint repo id and revision, NUL-padded UTF-8
MERKLE_ROOT_LEN = 32

# Witness bloom filters (pybloom-live, partitioned). capacity 256 and error rate 0.0005 give
# 11 slices of 369 bits hashed with SHA-256: about 0.05% false positives at 256 items, far
# under the 1% target, and a hash both a Solana program (syscall) and any language reproduce.
BLOOM_CAPACITY = 256
BLOOM_ERROR_RATE = 0.0005
BLOOM_SLICES = 11
BLOOM_BITS_PER_SLICE = 369
BLOOM_BITS = BLOOM_SLICES * BLOOM_BITS_PER_SLICE  # 4059
BLOOM_BYTES = 508  # ceil(4059 / 8); the 5 trailing bits must be zero

# Bounds that keep integer arithmetic inside u64 in the Rust mirror (no u128 on chain).
MAX_WARMUP_TOKENS = 1 << 44
MAX_TIME_SECONDS = 1 << 32  # any single duration in the config

# A witness quorum needs at least this many witnesses out of those elected.
WITNESS_SALT = b"witness"
COMMITTEE_SALT = b"committee"
CHECKPOINTER_SALT = b"checkpointer"
ROUND_SEED_DOMAIN = b"psyche-round-seed"
SHUFFLE_ROUND_COUNT = 90
