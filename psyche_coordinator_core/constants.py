"""Protocol limits. Every number here is part of the on-chain layout: change one and the Rust
program, the conformance vectors and the account size all change with it."""

MAX_CLIENTS = 256  # clients in one epoch, and joiners waiting for the next one
MAX_WITNESSES = 32  # witnesses stored per round
NUM_STORED_ROUNDS = 4  # ring of rounds: health checks look two rounds back
RUN_ID_LEN = 32
REPO_LEN = 64  # checkpoint repo id and revision, NUL-padded UTF-8
MERKLE_ROOT_LEN = 32
PARAM_HASH_LEN = 32  # SHA-256 of a model's parameters (see the client's parameter_hash)
ZERO_HASH = bytes(PARAM_HASH_LEN)

# The account layout's version, stored in the state (offset 92). Bump it with any change to the
# canonical bytes: a reader meeting another version stops instead of misreading the fields.
# 1: the layout before the version existed (those 4 bytes were zero padding); 2: parameter hashes;
# 3: client phases (join mid-epoch), the rounds' warming mask, the join settings;
# 4: points (each client's identity and unsettled presence and sequences, the points settings);
# 5: evidence (each client's accusers mask, the config's evidence_quorum, client state Evicted);
# 6: the rounds' accused mask (results a verifier judged bad: left out of the round's apply);
# 7: the run spec's hash (what clients train: model, optimizer, data, store, relays);
# 8: each client's witness-bloom bits (its signer hashed once, at join, instead of every round).
LAYOUT_VERSION = 8
MAX_SYNC_WARMUP_ROUNDS = 32
# Trainers one elected verifier judges per round when the config's `verify_sample` is 0
# (`verification_sample`): its evidence may name only those, which bounds how many honest
# results one lying verifier can leave out.
VERIFY_SAMPLE = 3

# Witness bloom filters (pybloom-live, partitioned). capacity 256 and error rate 0.005 give
# 8 slices of 353 bits hashed with XXH3-128: about 0.5% false positives at 256 items, under
# the 1% target, and small enough that a witness (two filters) fits in one Solana transaction
# (1,232 bytes); a smaller error rate makes pybloom-live pick a wider hash and larger filters.
BLOOM_CAPACITY = 256
BLOOM_ERROR_RATE = 0.005
BLOOM_SLICES = 8
BLOOM_BITS_PER_SLICE = 353
BLOOM_BITS = BLOOM_SLICES * BLOOM_BITS_PER_SLICE  # 2824, exactly 353 bytes
BLOOM_BYTES = 356  # 353 bytes of bits and 3 zero bytes, so witnesses stay 8-byte aligned

# Bounds that keep integer arithmetic inside u64 in the Rust mirror (no u128 on chain).
MAX_WARMUP_TOKENS = 1 << 44
MAX_TIME_SECONDS = 1 << 32  # any single duration in the config
MAX_FLOPS_PER_TOKEN = 1 << 48  # 280 TFLOPs per token: a model of ~47 trillion parameters

# Points: node keys that may act for one contributor identity (the chain's contributor account
# holds their list; off chain each carries a delegation the identity signed).
MAX_DELEGATES = 8

# A witness quorum needs at least this many witnesses out of those elected.
WITNESS_SALT = b"witness"
COMMITTEE_SALT = b"committee"
CHECKPOINTER_SALT = b"checkpointer"
ROUND_SEED_DOMAIN = b"psyche-round-seed"
