//! Coordinator state (`state.py`) stored directly in the canonical layout of `canonical.py`:
//!
//! ```text
//!   header   0..96     run_id[32] run_seed:u64 run_state_start:u64 epoch_start_timestamp:u64
//!                      epoch_start_data_index:u64 epoch:u32 step:u32 start_step:u32 last_step:u32
//!                      rounds_head:u32 clients_len:u16 pending_len:u16 run_state:u8 first_round:u8
//!                      pending_pause:u8 checkpoint_kind:u8 layout_version:u32
//!   config   96..208   RunConfig (its last 2 bytes zero padding)
//!   repo     208..336  checkpoint_repo[64] checkpoint_revision[64]
//!   hashes   336..480  checkpoint_hash[32] param_hash[32] due_hash[32] spec_hash[32]
//!                      checkpoint_step:u32 param_step:u32 due_step:u32 _pad[4]
//!   clients  480..     [Client; 256]  signer[32] p2p_identity[32] identity[32] state:u8
//!                                     phase:u8 _pad[2] since:u32 presence:u64 sequences:u64
//!                                     accusers[32] (bit i = client i, LSB first)
//!                                     bloom_bits:[u16; 8] (168 each; the witness-bloom bit of
//!                                     each slice for the signer's hex, set with the signer)
//!   pending            [Client; 256]
//!   rounds             [Round; 4]  height:u32 participant_count:u16 witnesses_len:u16
//!                      data_index:u64 random_seed:u64 participants[32] warming[32]
//!                      accused[32] (bit i = client i, LSB first)
//!                      [Witness; 32]  index:u16 _pad[6] broadcast_merkle[32] param_hash[32]
//!                                     participant_bloom[356] broadcast_bloom[356]   (784 each)
//! ```
//!
//! `layout_version` sits at offset 92 in every version from 2 on (version 1 had zero padding
//! there), so a reader can tell which layout it holds before decoding anything else.
//!
//! Unused client, round and witness slots are all zero; the code keeps them so (it zeroes a slot
//! whenever a list shrinks or a round is replaced), which is what makes the state hash of a Rust
//! state equal the Python one. The state hash is SHA-256 of these bytes.

use bytemuck::{Pod, Zeroable};

use crate::config::RunConfig;
use crate::constants::*;

#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Uninitialized = 0,
    WaitingForMembers = 1,
    Warmup = 2,
    RoundTrain = 3,
    RoundWitness = 4,
    Cooldown = 5,
    Finished = 6,
    Paused = 7,
}

impl RunState {
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Uninitialized,
            1 => Self::WaitingForMembers,
            2 => Self::Warmup,
            3 => Self::RoundTrain,
            4 => Self::RoundWitness,
            5 => Self::Cooldown,
            6 => Self::Finished,
            7 => Self::Paused,
            _ => return None,
        })
    }

    pub const fn halted(self) -> bool {
        matches!(self, Self::Uninitialized | Self::Finished | Self::Paused)
    }

    pub const fn active(self) -> bool {
        matches!(self, Self::RoundTrain | Self::RoundWitness | Self::Cooldown)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::Uninitialized => "Uninitialized",
            Self::WaitingForMembers => "WaitingForMembers",
            Self::Warmup => "Warmup",
            Self::RoundTrain => "RoundTrain",
            Self::RoundWitness => "RoundWitness",
            Self::Cooldown => "Cooldown",
            Self::Finished => "Finished",
            Self::Paused => "Paused",
        }
    }
}

#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    Healthy = 0,
    /// Removed by a health check.
    Dropped = 1,
    /// Left (disconnect, pause, or an epoch without witnesses).
    Withdrawn = 2,
    /// Removed by a verifier quorum's evidence; cannot join again before the next epoch.
    Evicted = 3,
}

/// Where a client stands in joining a live run: queued for a sync slot, replaying the applied
/// results since its snapshot (phase 1), training without its results counting (phase 2), or
/// fully taking part. 0 is Active, so pending entries and epoch-start clients are plain Active.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientPhase {
    Active = 0,
    Queued = 1,
    Syncing = 2,
    WarmingUp = 3,
}

impl ClientPhase {
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Active,
            1 => Self::Queued,
            2 => Self::Syncing,
            3 => Self::WarmingUp,
            _ => return None,
        })
    }
}

#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointKind {
    /// No source: the model is initialized from the run seed.
    Dummy = 0,
    /// Load from the checkpoint repo.
    Hub = 1,
    /// Load from the peers that trained the last epoch.
    P2P = 2,
    /// Load the snapshot recorded at the checkpoint repo (its location in the run's store) and
    /// check that its parameters hash to the checkpoint hash.
    Stored = 3,
}

impl CheckpointKind {
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Dummy,
            1 => Self::Hub,
            2 => Self::P2P,
            3 => Self::Stored,
            _ => return None,
        })
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "Dummy" => Self::Dummy,
            "Hub" => Self::Hub,
            "P2P" => Self::P2P,
            "Stored" => Self::Stored,
            _ => return None,
        })
    }
}

/// The first 96 bytes of the state.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct StateHeader {
    /// NUL-padded UTF-8, 1 to 32 bytes, no NUL inside.
    pub run_id: [u8; RUN_ID_LEN],
    pub run_seed: u64,
    /// Unix seconds when `run_state` was entered.
    pub run_state_start: u64,
    pub epoch_start_timestamp: u64,
    pub epoch_start_data_index: u64,
    pub epoch: u32,
    /// The step the current (or next) round trains; step 1 is the first.
    pub step: u32,
    /// Step of the epoch's first round.
    pub start_step: u32,
    /// 0 until the epoch starts draining; then the step that ends it.
    pub last_step: u32,
    pub rounds_head: u32,
    pub clients_len: u16,
    pub pending_len: u16,
    /// A [`RunState`].
    pub run_state: u8,
    pub first_round: u8,
    pub pending_pause: u8,
    /// A [`CheckpointKind`].
    pub checkpoint_kind: u8,
    /// [`LAYOUT_VERSION`] for every state this crate makes; every operation refuses another
    /// (`LayoutVersionMismatch`). Version 1 had zero padding here.
    pub layout_version: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Client {
    /// 32-byte ed25519 public key that signs this client's operations.
    pub signer: [u8; KEY_LEN],
    /// 32-byte key of its peer-to-peer endpoint.
    pub p2p_identity: [u8; KEY_LEN],
    /// The contributor its points go to: the signer itself, or an identity that delegated to it.
    pub identity: [u8; KEY_LEN],
    /// A [`ClientState`].
    pub state: u8,
    /// A [`ClientPhase`]: how far a client that joined mid-epoch is in syncing.
    pub phase: u8,
    pub _pad: [u8; 2],
    /// The step at which the current phase began.
    pub since: u32,
    /// Rounds present (any phase) not yet settled into the identity's entry.
    pub presence: u64,
    /// Sequences trained and vouched for by a witness quorum, not yet settled.
    pub sequences: u64,
    /// Bitmask over `clients` indices (bit i = byte i/8, bit i%8): the elected verifiers that
    /// sent evidence against this client's results; zero whenever a join fills the slot.
    pub accusers: [u8; MAX_CLIENTS / 8],
    /// The bit of each slice that the hex of `signer` sets in a witness bloom
    /// (`bloom::signer_bits`), computed once when the signer is written: vouching for a client
    /// is then checked without hashing its key every round.
    pub bloom_bits: [u16; BLOOM_SLICES],
}

impl Client {
    pub fn is_healthy(&self) -> bool {
        self.state == ClientState::Healthy as u8
    }

    /// Its phase; an unknown byte (never written by this crate) reads as `Active`.
    pub fn phase(&self) -> ClientPhase {
        ClientPhase::from_u8(self.phase).unwrap_or(ClientPhase::Active)
    }

    fn healthy_in(&self, phases: &[ClientPhase]) -> bool {
        self.is_healthy() && phases.contains(&self.phase())
    }

    /// Healthy and training rounds whose results count or warm up (Active, WarmingUp).
    pub fn is_training(&self) -> bool {
        self.healthy_in(&[ClientPhase::Active, ClientPhase::WarmingUp])
    }

    /// Healthy and taking a sync slot (Syncing, WarmingUp).
    pub fn is_syncing(&self) -> bool {
        self.healthy_in(&[ClientPhase::Syncing, ClientPhase::WarmingUp])
    }

    /// Whether the slot holds points not yet settled.
    pub fn unsettled(&self) -> bool {
        self.presence != 0 || self.sequences != 0
    }
}

#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct Witness {
    /// The witness's index in `clients`.
    pub index: u16,
    pub _pad: [u8; 6],
    pub broadcast_merkle: [u8; MERKLE_ROOT_LEN],
    /// The parameters the witness trains this step with (zero for warmup witnesses).
    pub param_hash: [u8; PARAM_HASH_LEN],
    /// Signers whose results it received and verified.
    pub participant_bloom: [u8; BLOOM_BYTES],
    /// Commitments of those results.
    pub broadcast_bloom: [u8; BLOOM_BYTES],
}

// Pod requires Copy, so Clone is derived; nothing copies this by value (the core works
// through &mut on the account bytes), so that generated method's frame is never used.
#[allow(clippy::large_stack_frames)]
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct Round {
    /// Rounds since the epoch started.
    pub height: u32,
    /// Popcount of `participants`.
    pub participant_count: u16,
    pub witnesses_len: u16,
    /// First sequence of this round's batch.
    pub data_index: u64,
    pub random_seed: u64,
    /// Bitmask over `clients` indices (bit i = byte i/8, bit i%8): who takes part in this round.
    pub participants: [u8; MAX_CLIENTS / 8],
    /// The participants that were WarmingUp when the round started: their results are trained
    /// and witnessed but never applied.
    pub warming: [u8; MAX_CLIENTS / 8],
    /// Trainers whose result of this round an elected verifier judged bad (`evidence`): every
    /// client leaves it out of the round's apply.
    pub accused: [u8; MAX_CLIENTS / 8],
    pub witnesses: [Witness; MAX_WITNESSES],
}

/// The whole account: 187,328 bytes.
// Pod requires Copy, so Clone is derived; nothing copies this by value (the core works
// through &mut on the account bytes), so that generated method's frame is never used.
#[allow(clippy::large_stack_frames)]
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct CoordinatorState {
    pub header: StateHeader,
    pub config: RunConfig,
    pub checkpoint_repo: [u8; REPO_LEN],
    pub checkpoint_revision: [u8; REPO_LEN],
    /// Parameter hash of the recorded snapshot; zero when none is.
    pub checkpoint_hash: [u8; PARAM_HASH_LEN],
    /// The latest parameter hash a witness quorum agreed on: the parameters that train
    /// `param_step` (every step up to `param_step - 2` applied). Zero until one is.
    pub param_hash: [u8; PARAM_HASH_LEN],
    /// The agreed hash at the latest multiple of `checkpoint_interval`: a mid-epoch snapshot
    /// point, kept until the next one is agreed.
    pub due_hash: [u8; PARAM_HASH_LEN],
    /// SHA-256 of the run spec's canonical bytes (what clients train: model, optimizer, data,
    /// snapshot store, relays); clients refuse a spec that does not hash to it. Zero: no spec
    /// (clients simulate training).
    pub spec_hash: [u8; PARAM_HASH_LEN],
    /// The step the recorded snapshot's parameters train (see `param_hash`).
    pub checkpoint_step: u32,
    pub param_step: u32,
    pub due_step: u32,
    pub _hashes_pad: [u8; 4],
    /// This epoch's clients; indices are stable within an epoch.
    pub clients: [Client; MAX_CLIENTS],
    /// Joined for the next epoch.
    pub pending: [Client; MAX_CLIENTS],
    pub rounds: [Round; NUM_STORED_ROUNDS],
}

const _: () = assert!(core::mem::size_of::<StateHeader>() == HEADER_SIZE);
const _: () = assert!(core::mem::size_of::<RunConfig>() == CONFIG_SIZE);
const _: () = assert!(core::mem::size_of::<Client>() == CLIENT_SIZE);
const _: () = assert!(core::mem::size_of::<Witness>() == WITNESS_SIZE);
const _: () = assert!(core::mem::size_of::<Round>() == ROUND_SIZE);
const _: () = assert!(core::mem::size_of::<CoordinatorState>() == STATE_SIZE);
const _: () = assert!(core::mem::offset_of!(CoordinatorState, config) == CONFIG_OFFSET);
const _: () = assert!(core::mem::offset_of!(CoordinatorState, checkpoint_repo) == REPO_OFFSET);
const _: () = assert!(core::mem::offset_of!(CoordinatorState, checkpoint_hash) == HASHES_OFFSET);
const _: () = assert!(core::mem::offset_of!(CoordinatorState, clients) == CLIENTS_OFFSET);
const _: () = assert!(core::mem::offset_of!(StateHeader, layout_version) == VERSION_OFFSET);
const _: () = assert!(core::mem::offset_of!(CoordinatorState, pending) == PENDING_OFFSET);
const _: () = assert!(core::mem::offset_of!(CoordinatorState, rounds) == ROUNDS_OFFSET);
const _: () = assert!(core::mem::offset_of!(Round, witnesses) == 120);
const _: () = assert!(core::mem::align_of::<CoordinatorState>() == 8);

/// Sets a whole Pod value to zero in place (never builds a large temporary on the stack).
pub(crate) fn zero<T: Pod>(value: &mut T) {
    bytemuck::bytes_of_mut(value).fill(0);
}

pub(crate) fn popcount(mask: &[u8; MAX_CLIENTS / 8]) -> usize {
    mask.iter().map(|b| b.count_ones() as usize).sum()
}

pub(crate) fn bit(mask: &[u8; MAX_CLIENTS / 8], i: usize) -> bool {
    i < MAX_CLIENTS && (mask[i / 8] >> (i % 8)) & 1 == 1
}

pub(crate) fn set_bit(mask: &mut [u8; MAX_CLIENTS / 8], i: usize) {
    mask[i / 8] |= 1 << (i % 8);
}

/// The bytes of a NUL-padded fixed string, without the padding.
pub(crate) fn fixed_str(raw: &[u8]) -> &[u8] {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    &raw[..end]
}

impl Round {
    /// Number of participants (the popcount of the bitmask).
    pub fn participant_total(&self) -> usize {
        popcount(&self.participants)
    }

    pub fn is_participant(&self, client_index: usize) -> bool {
        bit(&self.participants, client_index)
    }

    pub fn witnesses(&self) -> &[Witness] {
        &self.witnesses[..(self.witnesses_len as usize).min(MAX_WITNESSES)]
    }

    /// The `participant_indices()` of the round, in index order, into `out`; returns the count.
    pub fn participant_indices(&self, out: &mut [u8; MAX_CLIENTS]) -> usize {
        let mut n = 0;
        for i in 0..MAX_CLIENTS {
            if self.is_participant(i) {
                out[n] = i as u8;
                n += 1;
            }
        }
        n
    }
}

impl CoordinatorState {
    /// The run state; a byte that is no `RunState` (never written by this crate) reads as
    /// `Uninitialized`, which every operation but `resume`/`join`/`withdraw`/`update` refuses.
    pub fn run_state(&self) -> RunState {
        RunState::from_u8(self.header.run_state).unwrap_or(RunState::Uninitialized)
    }

    /// The checkpoint kind; an unknown byte (never written by this crate) reads as `Dummy`.
    pub fn checkpoint_kind(&self) -> CheckpointKind {
        CheckpointKind::from_u8(self.header.checkpoint_kind).unwrap_or(CheckpointKind::Dummy)
    }

    pub fn run_id(&self) -> &[u8] {
        fixed_str(&self.header.run_id)
    }

    pub fn repo(&self) -> &[u8] {
        fixed_str(&self.checkpoint_repo)
    }

    pub fn revision(&self) -> &[u8] {
        fixed_str(&self.checkpoint_revision)
    }

    pub fn clients(&self) -> &[Client] {
        &self.clients[..(self.header.clients_len as usize).min(MAX_CLIENTS)]
    }

    pub fn pending(&self) -> &[Client] {
        &self.pending[..(self.header.pending_len as usize).min(MAX_CLIENTS)]
    }

    pub fn head(&self) -> usize {
        self.header.rounds_head as usize % NUM_STORED_ROUNDS
    }

    pub fn current_round(&self) -> &Round {
        &self.rounds[self.head()]
    }

    pub fn current_round_mut(&mut self) -> &mut Round {
        let head = self.head();
        &mut self.rounds[head]
    }

    /// The slot of the round k rounds before the current one in this epoch, or None.
    fn round_back_slot(&self, k: usize) -> Option<usize> {
        if (self.current_round().height as usize) < k {
            return None;
        }
        Some((self.head() + NUM_STORED_ROUNDS - k % NUM_STORED_ROUNDS) % NUM_STORED_ROUNDS)
    }

    /// The round k rounds before the current one in this epoch, or None.
    pub fn round_back(&self, k: usize) -> Option<&Round> {
        Some(&self.rounds[self.round_back_slot(k)?])
    }

    pub fn round_back_mut(&mut self, k: usize) -> Option<&mut Round> {
        let i = self.round_back_slot(k)?;
        Some(&mut self.rounds[i])
    }

    pub fn round_step(&self, rnd: &Round) -> u64 {
        self.header.start_step as u64 + rnd.height as u64
    }

    /// Whether trainers train in this round: not in the two drain rounds that end an epoch.
    pub fn round_trains(&self, rnd: &Round) -> bool {
        let last = self.header.last_step as u64;
        // round_step < last_step - 2, without underflow
        last == 0 || self.round_step(rnd) + 2 < last
    }

    pub fn client_index(&self, signer: &[u8; KEY_LEN]) -> Option<usize> {
        self.clients().iter().position(|c| &c.signer == signer)
    }

    pub fn pending_index(&self, signer: &[u8; KEY_LEN]) -> Option<usize> {
        self.pending().iter().position(|c| &c.signer == signer)
    }

    pub fn healthy_count(&self) -> usize {
        self.clients().iter().filter(|c| c.is_healthy()).count()
    }

    /// Healthy clients in phase Active or WarmingUp: what every min_clients and warmup rule
    /// counts.
    pub fn training_count(&self) -> usize {
        self.clients().iter().filter(|c| c.is_training()).count()
    }

    /// Healthy clients in phase Syncing or WarmingUp: the sync slots taken.
    pub fn syncing_count(&self) -> usize {
        self.clients().iter().filter(|c| c.is_syncing()).count()
    }

    /// Healthy clients, plus pending entries whose signer is not one of them: the clients the
    /// run holds now and for the next epoch, counted once.
    pub fn member_count(&self) -> usize {
        let joining = self
            .pending()
            .iter()
            .filter(|p| !self.is_healthy_client(&p.signer))
            .count();
        self.healthy_count() + joining
    }

    /// Slots holding points not yet settled: a new epoch cannot reuse the slots before.
    pub fn unsettled_count(&self) -> usize {
        self.clients().iter().filter(|c| c.unsettled()).count()
    }

    /// Whether `signer` is a healthy client of this epoch.
    pub fn is_healthy_client(&self, signer: &[u8; KEY_LEN]) -> bool {
        self.clients()
            .iter()
            .any(|c| c.is_healthy() && &c.signer == signer)
    }

    fn mask_of(&self, pick: impl Fn(&Client) -> bool) -> [u8; MAX_CLIENTS / 8] {
        let mut mask = [0u8; MAX_CLIENTS / 8];
        for (i, c) in self.clients().iter().enumerate() {
            if pick(c) {
                set_bit(&mut mask, i);
            }
        }
        mask
    }

    /// A round's participants: the training clients.
    pub fn training_mask(&self) -> [u8; MAX_CLIENTS / 8] {
        self.mask_of(Client::is_training)
    }

    /// A round's warming trainers: healthy WarmingUp clients.
    pub fn warming_mask(&self) -> [u8; MAX_CLIENTS / 8] {
        self.mask_of(|c| c.healthy_in(&[ClientPhase::WarmingUp]))
    }

    /// The canonical bytes (the account data).
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::bytes_of(self)
    }
}

/// SHA-256 of the canonical bytes.
pub fn state_hash(state: &CoordinatorState) -> [u8; 32] {
    crate::shuffle::sha256(&[bytemuck::bytes_of(state)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn struct_sizes_and_offsets_match_canonical_py() {
        assert_eq!(size_of::<StateHeader>(), 96);
        assert_eq!(size_of::<RunConfig>(), 112);
        assert_eq!(size_of::<Client>(), 168);
        assert_eq!(size_of::<Witness>(), 784);
        assert_eq!(size_of::<Round>(), 25208);
        assert_eq!(size_of::<CoordinatorState>(), 187_328);
        // HEADER_FORMAT = "<32sQQQQIIIIIHHBBBBI"
        assert_eq!(offset_of!(StateHeader, run_seed), 32);
        assert_eq!(offset_of!(StateHeader, run_state_start), 40);
        assert_eq!(offset_of!(StateHeader, epoch_start_timestamp), 48);
        assert_eq!(offset_of!(StateHeader, epoch_start_data_index), 56);
        assert_eq!(offset_of!(StateHeader, epoch), 64);
        assert_eq!(offset_of!(StateHeader, step), 68);
        assert_eq!(offset_of!(StateHeader, start_step), 72);
        assert_eq!(offset_of!(StateHeader, last_step), 76);
        assert_eq!(offset_of!(StateHeader, rounds_head), 80);
        assert_eq!(offset_of!(StateHeader, clients_len), 84);
        assert_eq!(offset_of!(StateHeader, pending_len), 86);
        assert_eq!(offset_of!(StateHeader, run_state), 88);
        assert_eq!(offset_of!(StateHeader, first_round), 89);
        assert_eq!(offset_of!(StateHeader, pending_pause), 90);
        assert_eq!(offset_of!(StateHeader, checkpoint_kind), 91);
        assert_eq!(offset_of!(StateHeader, layout_version), 92);
        // CONFIG_FORMAT = "<QQQQQQIIIHHHHHHHHBBBBQQQIH2x"
        assert_eq!(offset_of!(RunConfig, total_steps), 48);
        assert_eq!(offset_of!(RunConfig, max_seq_len), 52);
        assert_eq!(offset_of!(RunConfig, checkpoint_interval), 56);
        assert_eq!(offset_of!(RunConfig, min_clients), 60);
        assert_eq!(offset_of!(RunConfig, global_batch_size_end), 68);
        assert_eq!(offset_of!(RunConfig, max_clients), 70);
        assert_eq!(offset_of!(RunConfig, max_syncing), 72);
        assert_eq!(offset_of!(RunConfig, kept_rounds), 74);
        assert_eq!(offset_of!(RunConfig, verification_percent), 76);
        assert_eq!(offset_of!(RunConfig, waiting_for_members_extra_time), 78);
        assert_eq!(offset_of!(RunConfig, sync_warmup_rounds), 79);
        assert_eq!(offset_of!(RunConfig, flops_per_token), 80);
        assert_eq!(offset_of!(RunConfig, tokens_per_compute_point), 88);
        assert_eq!(offset_of!(RunConfig, points_cap), 96);
        assert_eq!(offset_of!(RunConfig, presence_points), 104);
        assert_eq!(offset_of!(RunConfig, evidence_quorum), 108);
        assert_eq!(offset_of!(RunConfig, verify_sample), 110);
        // repo, then HASHES_FORMAT = "<32s32s32s32sIII4x"
        assert_eq!(offset_of!(CoordinatorState, checkpoint_repo), 208);
        assert_eq!(offset_of!(CoordinatorState, checkpoint_hash), 336);
        assert_eq!(offset_of!(CoordinatorState, param_hash), 368);
        assert_eq!(offset_of!(CoordinatorState, due_hash), 400);
        assert_eq!(offset_of!(CoordinatorState, spec_hash), 432);
        assert_eq!(offset_of!(CoordinatorState, checkpoint_step), 464);
        assert_eq!(offset_of!(CoordinatorState, param_step), 468);
        assert_eq!(offset_of!(CoordinatorState, due_step), 472);
        assert_eq!(offset_of!(CoordinatorState, clients), 480);
        // CLIENT_FORMAT = "<32s32s32sBBxxIQQ32s8H"
        assert_eq!(offset_of!(Client, identity), 64);
        assert_eq!(offset_of!(Client, state), 96);
        assert_eq!(offset_of!(Client, phase), 97);
        assert_eq!(offset_of!(Client, since), 100);
        assert_eq!(offset_of!(Client, presence), 104);
        assert_eq!(offset_of!(Client, sequences), 112);
        assert_eq!(offset_of!(Client, accusers), 120);
        assert_eq!(offset_of!(Client, bloom_bits), 152);
        // ROUND_HEAD_FORMAT = "<IHHQQ32s32s32s", WITNESS_HEAD_FORMAT = "<H6x32s32s"
        assert_eq!(offset_of!(Round, participant_count), 4);
        assert_eq!(offset_of!(Round, witnesses_len), 6);
        assert_eq!(offset_of!(Round, data_index), 8);
        assert_eq!(offset_of!(Round, random_seed), 16);
        assert_eq!(offset_of!(Round, participants), 24);
        assert_eq!(offset_of!(Round, warming), 56);
        assert_eq!(offset_of!(Round, accused), 88);
        assert_eq!(offset_of!(Round, witnesses), 120);
        assert_eq!(offset_of!(Witness, broadcast_merkle), 8);
        assert_eq!(offset_of!(Witness, param_hash), 40);
        assert_eq!(offset_of!(Witness, participant_bloom), 72);
        assert_eq!(offset_of!(Witness, broadcast_bloom), 428);
        assert_eq!(offset_of!(CoordinatorState, rounds), 86496);
    }

    #[test]
    fn fixed_strings_and_round_back() {
        assert_eq!(fixed_str(b"ab\0\0"), b"ab");
        assert_eq!(fixed_str(b"\0\0"), b"");
        let mut buf = vec![0u64; STATE_SIZE / 8];
        let s: &mut CoordinatorState = bytemuck::from_bytes_mut(bytemuck::cast_slice_mut(&mut buf));
        s.header.rounds_head = 1;
        s.rounds[1].height = 5;
        s.rounds[0].height = 4;
        s.rounds[3].height = 3;
        assert_eq!(s.round_back(0).unwrap().height, 5);
        assert_eq!(s.round_back(1).unwrap().height, 4);
        assert_eq!(s.round_back(2).unwrap().height, 3);
        s.rounds[1].height = 1;
        assert!(s.round_back(2).is_none());
    }
}
