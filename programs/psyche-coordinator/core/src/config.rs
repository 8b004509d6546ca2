//! RunConfig (`config.py`): every knob of a run, stored in the canonical layout (112 bytes,
//! `CONFIG_FORMAT = "<QQQQQQIIIHHHHHHHHBBBBQQQI4x"`).

use bytemuck::{Pod, Zeroable};

use crate::constants::{
    MAX_CLIENTS, MAX_FLOPS_PER_TOKEN, MAX_SYNC_WARMUP_ROUNDS, MAX_TIME_SECONDS, MAX_WARMUP_TOKENS, MAX_WITNESSES,
};
use crate::error::CoordinatorError;

/// Times are whole seconds; batch sizes count sequences of `max_seq_len` tokens.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct RunConfig {
    /// Warmup: clients load the model before the first round.
    pub warmup_time: u64,
    /// Cooldown: checkpointers save/upload the model.
    pub cooldown_time: u64,
    /// RoundTrain ends by this at the latest.
    pub max_round_train_time: u64,
    /// RoundWitness: slack for late witnesses.
    pub round_witness_time: u64,
    /// After this the epoch drains and ends.
    pub epoch_time: u64,
    /// Tokens over which the batch size ramps from start to end.
    pub global_batch_size_warmup_tokens: u64,
    /// Steps trained over the run's lifetime.
    pub total_steps: u32,
    /// Tokens per sequence.
    pub max_seq_len: u32,
    /// Also snapshot mid-epoch every this many steps; 0 = only at Cooldown. At most
    /// `total_steps`.
    pub checkpoint_interval: u32,
    /// Below this an epoch ends.
    pub min_clients: u16,
    /// Needed to start an epoch.
    pub init_min_clients: u16,
    /// Witnesses per round; 0 = every client, capped at 32.
    pub witness_nodes: u16,
    pub global_batch_size_start: u16,
    pub global_batch_size_end: u16,
    /// Capacity: a join beyond this many clients (this epoch's and the next's) is refused
    /// (`RunFull`). In [init_min_clients, MAX_CLIENTS].
    pub max_clients: u16,
    /// How many clients may be Syncing or WarmingUp at once; the rest queue in FIFO order.
    /// 0 = no mid-epoch join: every join waits for the next epoch.
    pub max_syncing: u16,
    /// W: rounds of applied results every client keeps and serves to syncing peers; at least
    /// `checkpoint_interval`.
    pub kept_rounds: u16,
    /// Share of each round's clients elected to verify, not train.
    pub verification_percent: u8,
    /// Share elected to checkpoint at cooldown; 0 = anyone may.
    pub checkpointer_percent: u8,
    /// Least time in WaitingForMembers before Warmup.
    pub waiting_for_members_extra_time: u8,
    /// K: rounds a synced client trains before its results count (at most 32).
    pub sync_warmup_rounds: u8,
    /// Training FLOPs per token, from the model's shape (0: unknown); a display figure.
    pub flops_per_token: u64,
    /// Tokens trained and vouched for that earn one compute point (at least 1).
    pub tokens_per_compute_point: u64,
    /// The most points one identity may earn in the run; 0 = no cap.
    pub points_cap: u64,
    /// Points for every round a client is present, in any phase.
    pub presence_points: u32,
    /// Distinct elected verifiers whose evidence against a trainer's result evicts it.
    pub evidence_quorum: u16,
    /// Trainers' results each elected verifier judges a round; 0 = `VERIFY_SAMPLE` (3). When
    /// the samples add up to more than the trainers, each result has several judges.
    pub verify_sample: u8,
    pub _pad: [u8; 1],
}

const _: () = assert!(core::mem::size_of::<RunConfig>() == crate::constants::CONFIG_SIZE);
const _: () = assert!(core::mem::align_of::<RunConfig>() == 8);

impl Default for RunConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl RunConfig {
    /// The dataclass defaults of `RunConfig` (a missing key in `from_dict` takes these).
    pub const DEFAULT: RunConfig = RunConfig {
        warmup_time: 30,
        cooldown_time: 10,
        max_round_train_time: 30,
        round_witness_time: 2,
        epoch_time: 600,
        global_batch_size_warmup_tokens: 0,
        total_steps: 1000,
        max_seq_len: 512,
        checkpoint_interval: 0,
        min_clients: 1,
        init_min_clients: 1,
        witness_nodes: 0,
        global_batch_size_start: 8,
        global_batch_size_end: 8,
        max_clients: MAX_CLIENTS as u16,
        max_syncing: 0,
        kept_rounds: 64,
        verification_percent: 0,
        checkpointer_percent: 0,
        waiting_for_members_extra_time: 3,
        sync_warmup_rounds: 2,
        flops_per_token: 0,
        tokens_per_compute_point: 1_000_000,
        points_cap: 0,
        presence_points: 1,
        evidence_quorum: 2,
        verify_sample: 0,
        _pad: [0; 1],
    };

    /// The same rules as `RunConfig.validate`; every violation is `InvalidConfig`.
    pub fn validate(&self) -> Result<(), CoordinatorError> {
        let t = MAX_TIME_SECONDS;
        let e = self.epoch_time;
        let m = self.min_clients as usize;
        let w = m.min(MAX_WITNESSES);
        let s = self.global_batch_size_start;
        let ok = (1..=t).contains(&self.epoch_time)
            && self.warmup_time < e
            && (1..=t).contains(&self.cooldown_time)
            && (1..e).contains(&self.max_round_train_time)
            && (1..=t).contains(&self.round_witness_time)
            && self.global_batch_size_warmup_tokens <= MAX_WARMUP_TOKENS
            && (1..=u32::MAX - 8).contains(&self.total_steps)
            && self.max_seq_len >= 1
            && (1..=MAX_CLIENTS).contains(&m)
            && (m..=MAX_CLIENTS).contains(&(self.init_min_clients as usize))
            && (self.witness_nodes as usize) <= w
            && s >= 1
            && self.global_batch_size_end >= s
            && self.verification_percent <= 50
            && self.checkpointer_percent <= 100
            && self.waiting_for_members_extra_time >= 1
            && self.checkpoint_interval <= self.total_steps
            && (self.init_min_clients..=MAX_CLIENTS as u16).contains(&self.max_clients)
            && (self.max_syncing as usize) <= MAX_CLIENTS
            && self.checkpoint_interval <= self.kept_rounds as u32
            && self.sync_warmup_rounds <= MAX_SYNC_WARMUP_ROUNDS
            && self.flops_per_token <= MAX_FLOPS_PER_TOKEN
            && self.tokens_per_compute_point >= 1
            && (1..=MAX_CLIENTS).contains(&(self.evidence_quorum as usize));
        if ok {
            Ok(())
        } else {
            Err(CoordinatorError::InvalidConfig)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_ranges_are_enforced() {
        assert_eq!(RunConfig::DEFAULT.validate(), Ok(()));
        let bad: [fn(&mut RunConfig); 27] = [
            |c| c.epoch_time = 0,
            |c| c.epoch_time = MAX_TIME_SECONDS + 1,
            |c| c.warmup_time = c.epoch_time,
            |c| c.cooldown_time = 0,
            |c| c.max_round_train_time = c.epoch_time,
            |c| c.round_witness_time = 0,
            |c| c.global_batch_size_warmup_tokens = MAX_WARMUP_TOKENS + 1,
            |c| c.total_steps = u32::MAX - 7,
            |c| c.max_seq_len = 0,
            |c| c.min_clients = 257,
            |c| c.init_min_clients = 0,
            |c| c.witness_nodes = 2,
            |c| c.global_batch_size_start = 0,
            |c| c.global_batch_size_end = 7,
            |c| c.verification_percent = 51,
            |c| c.checkpointer_percent = 101,
            |c| c.waiting_for_members_extra_time = 0,
            |c| c.checkpoint_interval = c.total_steps + 1,
            |c| c.max_clients = c.init_min_clients - 1,
            |c| c.max_clients = 257,
            |c| c.max_syncing = 257,
            |c| {
                c.checkpoint_interval = 65;
                c.kept_rounds = 64
            },
            |c| c.sync_warmup_rounds = 33,
            |c| c.flops_per_token = MAX_FLOPS_PER_TOKEN + 1,
            |c| c.tokens_per_compute_point = 0,
            |c| c.evidence_quorum = 0,
            |c| c.evidence_quorum = 257,
        ];
        for (i, f) in bad.iter().enumerate() {
            let mut c = RunConfig::DEFAULT;
            f(&mut c);
            assert_eq!(
                c.validate(),
                Err(CoordinatorError::InvalidConfig),
                "case {i}"
            );
        }
        // upper edges that are allowed
        let mut c = RunConfig::DEFAULT;
        c.total_steps = u32::MAX - 8;
        c.max_seq_len = u32::MAX;
        c.min_clients = 256;
        c.init_min_clients = 256;
        c.witness_nodes = 32;
        c.global_batch_size_end = u16::MAX;
        c.epoch_time = MAX_TIME_SECONDS;
        c.warmup_time = MAX_TIME_SECONDS - 1;
        c.global_batch_size_warmup_tokens = MAX_WARMUP_TOKENS;
        c.waiting_for_members_extra_time = u8::MAX;
        c.checkpointer_percent = 100;
        c.verification_percent = 50;
        c.checkpoint_interval = u16::MAX as u32;
        c.kept_rounds = u16::MAX;
        c.max_clients = 256;
        c.max_syncing = 256;
        c.sync_warmup_rounds = 32;
        c.flops_per_token = MAX_FLOPS_PER_TOKEN;
        c.tokens_per_compute_point = u64::MAX;
        c.points_cap = u64::MAX;
        c.presence_points = u32::MAX;
        assert_eq!(c.validate(), Ok(()));
        // and lower edges
        let mut c = RunConfig::DEFAULT;
        c.init_min_clients = 3;
        c.min_clients = 3;
        c.max_clients = 3;
        c.max_syncing = 0;
        c.sync_warmup_rounds = 0;
        c.checkpoint_interval = 10;
        c.kept_rounds = 10;
        assert_eq!(c.validate(), Ok(()));
    }
}
