//! The coordinator state machine (`coordinator.py`), operating in place on the account data.
//!
//! Every operation takes the state, `now` (unix seconds from the caller: the server clock or the
//! Clock sysvar on chain) and typed arguments, and returns `Result<(), CoordinatorError>`. Each
//! one runs all of its checks, in the order of the Python core (the first failing check decides
//! the error code), before it writes anything: a rejected operation leaves every byte as it was.
//!
//! Arguments that Python receives as `bytes` (keys, blooms, merkle root) are slices here, so the
//! length checks happen inside the operation at the same point as in Python and yield the same
//! code. `now >= 2^63` is `InvalidOperation`, as in `apply`; then a state of another layout
//! version is `LayoutVersionMismatch` (also `apply`), before the operation's own checks.

use crate::assignment::{batch_mask, for_each_batch, in_verification_sample, round_batch_size};
use crate::bloom::{check_bloom_bytes, has_bits, signer_bits};
use crate::committee::{
    expected_witnesses, is_checkpointer, is_verifier, is_witness, param_quorum, witness_quorum,
};
use crate::config::RunConfig;
use crate::constants::*;
use crate::error::CoordinatorError;
use crate::shuffle::{sha256, u64_le};
use crate::state::{
    bit, popcount, set_bit, zero, CheckpointKind, Client, ClientPhase, ClientState,
    CoordinatorState, Round, RunState,
};

type Result<T = ()> = core::result::Result<T, CoordinatorError>;
use CoordinatorError as E;

/// A checkpoint as an argument (`Checkpoint` in Python): repo and revision as UTF-8 bytes, the
/// recorded snapshot's parameter hash and step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointArgs<'a> {
    pub kind: CheckpointKind,
    pub repo: &'a [u8],
    pub revision: &'a [u8],
    pub hash: &'a [u8; PARAM_HASH_LEN],
    pub step: u32,
}

impl CheckpointArgs<'static> {
    pub const DUMMY: CheckpointArgs<'static> = CheckpointArgs {
        kind: CheckpointKind::Dummy,
        repo: b"",
        revision: b"",
        hash: &ZERO_HASH,
        step: 0,
    };
}

// ---------------------------------------------------------------- helpers

/// What `apply` checks before any operation: a valid time, then the state's layout version.
fn check_time(s: &CoordinatorState, now: u64) -> Result {
    if now >= MAX_TIME {
        return Err(E::InvalidOperation);
    }
    check_layout_version(s)
}

/// `LayoutVersionMismatch` unless the state is of this code's layout version.
pub fn check_layout_version(s: &CoordinatorState) -> Result {
    if s.header.layout_version != LAYOUT_VERSION {
        return Err(E::LayoutVersionMismatch);
    }
    Ok(())
}

/// `_key`: a 32-byte key, else `InvalidOperation`.
fn key(value: &[u8]) -> Result<&[u8; KEY_LEN]> {
    value.try_into().map_err(|_| E::InvalidOperation)
}

fn valid_fixed_str(raw: &[u8], max: usize) -> bool {
    raw.len() <= max && !raw.contains(&0) && core::str::from_utf8(raw).is_ok()
}

/// `_check_checkpoint`: repo and revision at most 64 bytes of NUL-free UTF-8; Hub, P2P and
/// Stored need a repo, Stored a nonzero hash. Else `InvalidCheckpoint`.
fn check_checkpoint(ck: &CheckpointArgs) -> Result {
    let ok = valid_fixed_str(ck.repo, REPO_LEN) && valid_fixed_str(ck.revision, REPO_LEN);
    if !ok || (ck.kind != CheckpointKind::Dummy && ck.repo.is_empty()) {
        return Err(E::InvalidCheckpoint);
    }
    if ck.kind == CheckpointKind::Stored && *ck.hash == ZERO_HASH {
        return Err(E::InvalidCheckpoint);
    }
    Ok(())
}

fn write_checkpoint(s: &mut CoordinatorState, ck: &CheckpointArgs) {
    s.header.checkpoint_kind = ck.kind as u8;
    s.checkpoint_repo.fill(0);
    s.checkpoint_repo[..ck.repo.len()].copy_from_slice(ck.repo);
    s.checkpoint_revision.fill(0);
    s.checkpoint_revision[..ck.revision.len()].copy_from_slice(ck.revision);
    s.checkpoint_hash = *ck.hash;
    s.checkpoint_step = ck.step;
}

/// At least one second must pass even for a zero duration, as in Psyche. (A sum past u64 is
/// past any `now < 2^63`, so saturating is exact.)
fn timed_out(s: &CoordinatorState, now: u64, duration: u64) -> bool {
    let start = s.header.run_state_start;
    now != start && now >= start.saturating_add(duration)
}

fn change_state(s: &mut CoordinatorState, now: u64, to: RunState) {
    debug_assert_ne!(s.run_state(), to);
    s.header.run_state = to as u8;
    s.header.run_state_start = now;
}

/// First 8 bytes (LE) of sha256(domain || run_seed u64 LE || epoch u32 LE || step u32 LE ||
/// now u64 LE).
pub fn round_seed(s: &CoordinatorState, now: u64) -> u64 {
    u64_le(&sha256(&[
        ROUND_SEED_DOMAIN,
        &s.header.run_seed.to_le_bytes(),
        &s.header.epoch.to_le_bytes(),
        &s.header.step.to_le_bytes(),
        &now.to_le_bytes(),
    ]))
}

fn remove_pending(s: &mut CoordinatorState, p: usize) {
    let len = s.pending().len();
    s.pending.copy_within(p + 1..len, p);
    zero(&mut s.pending[len - 1]);
    s.header.pending_len = (len - 1) as u16;
}

fn withdraw_all(s: &mut CoordinatorState) {
    let n = s.clients().len();
    for c in s.clients[..n].iter_mut() {
        if c.is_healthy() {
            c.state = ClientState::Withdrawn as u8;
        }
    }
}

/// `_sender`: the index of the healthy client at `index` whose signer is `signer`.
fn sender(s: &CoordinatorState, signer: &[u8], index: u32) -> Result<usize> {
    let signer = key(signer)?;
    let index = index as usize;
    if index >= s.clients().len() {
        return Err(E::InvalidClientIndex);
    }
    let c = &s.clients[index];
    if &c.signer != signer || !c.is_healthy() {
        return Err(E::NotAClient);
    }
    Ok(index)
}

/// The checks of `_push_witness`.
fn check_push_witness(rnd: &Round, index: usize) -> Result {
    if rnd.witnesses().iter().any(|w| w.index as usize == index) {
        return Err(E::DuplicateWitness);
    }
    if rnd.witnesses().len() >= MAX_WITNESSES {
        return Err(E::WitnessesFull);
    }
    Ok(())
}

/// Appends a witness slot (zeroed, then filled by `fill`); call `check_push_witness` first.
fn push_witness(rnd: &mut Round, index: usize, fill: impl FnOnce(&mut crate::state::Witness)) {
    let slot = &mut rnd.witnesses[rnd.witnesses_len as usize];
    zero(slot);
    slot.index = index as u16;
    fill(slot);
    rnd.witnesses_len += 1;
}

// ---------------------------------------------------------------- phase changes

fn start_waiting_for_members(s: &mut CoordinatorState, now: u64) {
    let to = if s.header.step > s.config.total_steps {
        RunState::Finished
    } else {
        RunState::WaitingForMembers
    };
    change_state(s, now, to);
}

fn start_epoch(s: &mut CoordinatorState, now: u64) {
    if s.checkpoint_kind() == CheckpointKind::P2P {
        let held = s.pending().iter().any(|p| {
            s.clients()
                .iter()
                .any(|c| c.is_healthy() && c.signer == p.signer)
        });
        if !held {
            // nobody who holds last epoch's model is here: fall back to the recorded snapshot,
            // else the Hub repository, else the run seed (which clients refuse past step 1)
            let kind = if s.checkpoint_hash != ZERO_HASH {
                CheckpointKind::Stored
            } else if s.repo().is_empty() {
                CheckpointKind::Dummy
            } else {
                CheckpointKind::Hub
            };
            s.header.checkpoint_kind = kind as u8;
        }
    }
    let joining = s.pending().len();
    let old = s.clients().len();
    let step = s.header.step;
    for i in 0..joining {
        let p = s.pending[i];
        s.clients[i] = Client {
            signer: p.signer,
            p2p_identity: p.p2p_identity,
            identity: p.identity,
            state: ClientState::Healthy as u8,
            phase: ClientPhase::Active as u8,
            _pad: [0; 2],
            since: step,
            presence: 0,
            sequences: 0,
            accusers: [0; MAX_CLIENTS / 8],
            bloom_bits: p.bloom_bits,
        };
        zero(&mut s.pending[i]);
    }
    for c in s.clients[joining..old.max(joining)].iter_mut() {
        zero(c);
    }
    s.header.clients_len = joining as u16;
    s.header.pending_len = 0;
    for r in s.rounds.iter_mut() {
        zero(r);
    }
    s.header.rounds_head = 0;
    s.header.first_round = 1;
    s.header.start_step = s.header.step;
    s.header.last_step = 0;
    s.header.epoch_start_timestamp = now;
    change_state(s, now, RunState::Warmup);
}

/// `_set_phase`: the client at `index` enters `phase` at the current step.
fn set_phase(s: &mut CoordinatorState, index: usize, phase: ClientPhase) {
    let step = s.header.step;
    let c = &mut s.clients[index];
    c.phase = phase as u8;
    c.since = step;
}

/// `_promote_queued`: queued clients start syncing, first come (smallest `(since, index)`)
/// first served, while fewer than `max_syncing` are Syncing or WarmingUp.
fn promote_queued(s: &mut CoordinatorState) {
    // each pass promotes one client or returns: at most MAX_CLIENTS passes
    for _ in 0..MAX_CLIENTS {
        if s.syncing_count() >= s.config.max_syncing as usize {
            return;
        }
        let first = s
            .clients()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_healthy() && c.phase() == ClientPhase::Queued)
            .min_by_key(|(i, c)| (c.since, *i))
            .map(|(i, _)| i);
        match first {
            Some(i) => set_phase(s, i, ClientPhase::Syncing),
            None => return,
        }
    }
}

fn start_round_train(s: &mut CoordinatorState, now: u64) {
    // a client synced during round w warms up in rounds w+1..w+K, and is Active from w+K+1
    let warm = s.config.sync_warmup_rounds as u64;
    let step = s.header.step as u64;
    for i in 0..s.clients().len() {
        let c = &s.clients[i];
        if c.is_training() && c.phase() == ClientPhase::WarmingUp && step > c.since as u64 + warm {
            set_phase(s, i, ClientPhase::Active);
        }
    }
    promote_queued(s);
    let (head, height, data_index) = if s.header.first_round != 0 {
        (0, 0, s.header.epoch_start_data_index)
    } else {
        let prev = s.current_round();
        (
            (s.head() + 1) % NUM_STORED_ROUNDS,
            prev.height + 1,
            prev.data_index + round_batch_size(&s.config, prev),
        )
    };
    s.header.rounds_head = head as u32;
    let seed = round_seed(s, now);
    let mask = s.training_mask();
    let warming = s.warming_mask();
    let r = &mut s.rounds[head];
    zero(r);
    r.height = height;
    r.data_index = data_index;
    r.random_seed = seed;
    r.participants = mask;
    r.warming = warming;
    r.participant_count = popcount(&mask) as u16;
    change_state(s, now, RunState::RoundTrain);
}

/// `_credit_round`: points for the round that ends. Presence for every healthy client in any
/// phase, and compute for the sequences of the round before it whose results this round's
/// witnesses vouch for (a witness quorum received them; warming-up trainers included). A slot
/// holds them (saturating u64) until they are settled into its identity's entry.
fn credit_round(s: &mut CoordinatorState) {
    let n = s.clients().len();
    for c in s.clients[..n].iter_mut() {
        if c.is_healthy() {
            c.presence = c.presence.saturating_add(1);
        }
    }
    let head = s.head();
    let Some(trained) = s.round_back(1) else {
        return;
    };
    let cur = &s.rounds[head];
    if !s.round_trains(trained) || cur.witnesses().is_empty() {
        return;
    }
    let elected = expected_witnesses(s.config.witness_nodes, cur.participant_total());
    let quorum = witness_quorum(elected);
    // the round before the current one is another ring slot: read it and the current round
    // while the clients are written (disjoint fields of the state)
    let CoordinatorState {
        config,
        clients,
        rounds,
        header,
        ..
    } = s;
    let trained_at = (head + NUM_STORED_ROUNDS - 1) % NUM_STORED_ROUNDS;
    let (trained, cur) = (&rounds[trained_at], &rounds[head]);
    let len = (header.clients_len as usize).min(MAX_CLIENTS);
    let vouchers = Vouchers::of(cur);
    for_each_batch(config, trained, |index, batch| {
        if index >= len {
            return; // never: a round's participants are clients of its epoch
        }
        let c = &mut clients[index];
        // an evicted slot's points are forfeited, the batch it was accused over included
        if c.state != ClientState::Evicted as u8 && vouchers.score(cur, &c.bloom_bits) >= quorum {
            c.sequences = c.sequences.saturating_add(batch.len());
        }
    });
}

fn end_round(s: &mut CoordinatorState, now: u64) {
    credit_round(s);
    s.header.first_round = 0;
    s.header.step += 1;
    let cur = s.current_round();
    let witnesses = cur.witnesses().len();
    if witnesses == 0 {
        // nobody witnessed: the witnesses left or everyone did; the epoch cannot go on
        withdraw_all(s);
        change_state(s, now, RunState::Cooldown);
        return;
    }
    let elected = expected_witnesses(s.config.witness_nodes, cur.participant_total());
    let epoch_over = now
        >= s.header
            .epoch_start_timestamp
            .saturating_add(s.config.epoch_time);
    if s.header.last_step == 0 && (epoch_over || s.header.step > s.config.total_steps) {
        // drain: two more rounds without training witness and apply the last results
        s.header.last_step = s.header.step + 2;
    }
    let last = s.header.last_step;
    if (last != 0 && s.header.step >= last)
        || s.training_count() < s.config.min_clients as usize
        || witnesses < witness_quorum(elected)
        || s.header.pending_pause != 0
    {
        change_state(s, now, RunState::Cooldown);
    } else {
        start_round_train(s, now);
    }
}

fn end_epoch(s: &mut CoordinatorState, now: u64) {
    let cur = s.current_round();
    s.header.epoch_start_data_index = cur.data_index + round_batch_size(&s.config, cur);
    s.header.epoch += 1;
    if s.checkpoint_kind() != CheckpointKind::P2P {
        // the epoch's clients now hold the newest model; joiners fetch it from them
        s.header.checkpoint_kind = CheckpointKind::P2P as u8;
    }
    if s.header.pending_pause != 0 {
        withdraw_all(s);
        s.header.pending_pause = 0;
        change_state(s, now, RunState::Paused);
    } else {
        start_waiting_for_members(s, now);
    }
}

// ---------------------------------------------------------------- operations

/// A run as its creator makes it (Uninitialized until resumed), written over the whole account.
/// `run_id`: 1 to 32 bytes of NUL-free UTF-8, else `InvalidRunId`; then `InvalidConfig`, then
/// `InvalidCheckpoint`.
pub fn new_run(
    s: &mut CoordinatorState,
    run_id: &[u8],
    config: &RunConfig,
    run_seed: u64,
    checkpoint: &CheckpointArgs,
) -> Result {
    if run_id.is_empty() || !valid_fixed_str(run_id, RUN_ID_LEN) {
        return Err(E::InvalidRunId);
    }
    config.validate()?;
    check_checkpoint(checkpoint)?;
    zero(s);
    s.header.run_id[..run_id.len()].copy_from_slice(run_id);
    s.header.run_seed = run_seed;
    s.header.step = 1;
    s.header.first_round = 1;
    s.header.run_state = RunState::Uninitialized as u8;
    s.header.layout_version = LAYOUT_VERSION;
    s.config = *config;
    write_checkpoint(s, checkpoint);
    Ok(())
}

/// A valid time and a run that is not halted; returns its state.
fn running(s: &CoordinatorState, now: u64) -> core::result::Result<RunState, E> {
    check_time(s, now)?;
    let st = s.run_state();
    if st.halted() {
        return Err(E::Halted);
    }
    Ok(st)
}

/// Witnesses and health checks belong to a round: RoundTrain or RoundWitness.
fn in_round(s: &CoordinatorState, now: u64) -> core::result::Result<RunState, E> {
    let st = running(s, now)?;
    if !matches!(st, RunState::RoundTrain | RunState::RoundWitness) {
        return Err(E::InvalidRunState);
    }
    Ok(st)
}

pub fn tick(s: &mut CoordinatorState, now: u64) -> Result {
    let st = running(s, now)?;
    let cfg = s.config;
    match st {
        RunState::WaitingForMembers => {
            // the new epoch reuses the slots: the points they hold are settled first
            if s.pending().len() >= cfg.init_min_clients as usize
                && s.unsettled_count() == 0
                && timed_out(s, now, cfg.waiting_for_members_extra_time as u64)
            {
                start_epoch(s, now);
            }
        }
        RunState::Warmup => {
            let over = timed_out(s, now, cfg.warmup_time);
            if over {
                drop_unready(s);
            }
            if s.training_count() < cfg.min_clients as usize {
                start_waiting_for_members(s, now);
            } else if over || warmup_ready(s) {
                // ready: the last client not yet ready may have left since the last warmup witness
                start_round_train(s, now);
            }
        }
        RunState::RoundTrain => {
            if timed_out(s, now, cfg.max_round_train_time) {
                change_state(s, now, RunState::RoundWitness);
            }
        }
        RunState::RoundWitness => {
            if timed_out(s, now, cfg.round_witness_time) {
                end_round(s, now);
            }
        }
        RunState::Cooldown => {
            if timed_out(s, now, cfg.cooldown_time) {
                end_epoch(s, now);
            }
        }
        RunState::Uninitialized | RunState::Finished | RunState::Paused => {}
    }
    Ok(())
}

/// `_require_room`: a signer that is not a healthy client of this epoch is a new member,
/// refused (`RunFull`) when `max_clients` are members already.
fn require_room(s: &CoordinatorState, signer: &[u8; KEY_LEN]) -> Result {
    if s.client_index(signer)
        .is_some_and(|i| s.clients[i].is_healthy())
    {
        return Ok(()); // already counted: a client of this epoch joining for the next one
    }
    if s.member_count() >= s.config.max_clients as usize {
        return Err(E::RunFull);
    }
    Ok(())
}

/// `_joins_mid_epoch`: joins are allowed mid-epoch (`max_syncing > 0`), the epoch is in its
/// Warmup or rounds, and the signer is not a healthy client of it.
fn joins_mid_epoch(s: &CoordinatorState, signer: &[u8; KEY_LEN]) -> bool {
    let st = s.run_state();
    if s.config.max_syncing == 0
        || !matches!(
            st,
            RunState::Warmup | RunState::RoundTrain | RunState::RoundWitness
        )
    {
        return false;
    }
    !s.client_index(signer)
        .is_some_and(|i| s.clients[i].is_healthy())
}

/// Join the run. During an epoch's Warmup or rounds (when `max_syncing` allows joins
/// mid-epoch) a newcomer enters this epoch Queued and syncs when the queue lets it; otherwise,
/// and for a client of this epoch, the join is for the next epoch. One join covers one epoch.
/// `identity` is the contributor the client's points go to (None: the signer); the backend has
/// checked that the identity delegated to the signer.
pub fn join(
    s: &mut CoordinatorState,
    now: u64,
    signer: &[u8],
    p2p_identity: &[u8],
    identity: Option<&[u8]>,
) -> Result {
    check_time(s, now)?;
    let signer = key(signer)?;
    let p2p_identity = key(p2p_identity)?;
    let identity = match identity {
        Some(identity) => key(identity)?,
        None => signer,
    };
    if s.run_state() == RunState::Finished {
        return Err(E::RunFinished);
    }
    if s.client_index(signer)
        .is_some_and(|i| s.clients[i].state == ClientState::Evicted as u8)
    {
        return Err(E::Evicted);
    }
    if s.pending_index(signer).is_some() {
        return Err(E::AlreadyJoined);
    }
    require_room(s, signer)?;
    if joins_mid_epoch(s, signer) {
        if s.member_count() >= s.config.global_batch_size_end as usize {
            return Err(E::MoreClientsThanBatches);
        }
        let mut queued = Client {
            signer: *signer,
            p2p_identity: *p2p_identity,
            identity: *identity,
            state: ClientState::Healthy as u8,
            phase: ClientPhase::Queued as u8,
            _pad: [0; 2],
            since: s.header.step,
            presence: 0,
            sequences: 0,
            accusers: [0; MAX_CLIENTS / 8],
            bloom_bits: signer_bits(signer),
        };
        match s.client_index(signer) {
            // it left or was dropped this epoch: back at the queue's tail, in the same slot
            // with the points it holds, which stay its old identity's
            Some(i) => {
                let old = &s.clients[i];
                if old.unsettled() && old.identity != *identity {
                    return Err(E::PointsUnsettled);
                }
                queued.presence = old.presence;
                queued.sequences = old.sequences;
                s.clients[i] = queued;
            }
            None => {
                let n = s.clients().len();
                if n >= MAX_CLIENTS {
                    return Err(E::ClientsFull);
                }
                s.clients[n] = queued;
                s.header.clients_len = (n + 1) as u16;
            }
        }
        promote_queued(s);
        return Ok(());
    }
    let n = s.pending().len();
    if n >= MAX_CLIENTS {
        return Err(E::ClientsFull);
    }
    if n >= s.config.global_batch_size_end as usize {
        return Err(E::MoreClientsThanBatches);
    }
    s.pending[n] = Client {
        signer: *signer,
        p2p_identity: *p2p_identity,
        identity: *identity,
        state: ClientState::Healthy as u8,
        phase: ClientPhase::Active as u8,
        _pad: [0; 2],
        since: 0,
        presence: 0,
        sequences: 0,
        accusers: [0; MAX_CLIENTS / 8],
        bloom_bits: signer_bits(signer),
    };
    s.header.pending_len = (n + 1) as u16;
    Ok(())
}

/// Leave: drop out of the next epoch and, if healthy in this one, out of it too.
pub fn withdraw(s: &mut CoordinatorState, now: u64, signer: &[u8]) -> Result {
    check_time(s, now)?;
    let signer = key(signer)?;
    if s.run_state() == RunState::Finished {
        return Err(E::RunFinished);
    }
    let p = s.pending_index(signer);
    let i = s
        .client_index(signer)
        .filter(|&i| s.clients[i].is_healthy());
    if p.is_none() && i.is_none() {
        return Err(E::InvalidWithdraw);
    }
    if let Some(p) = p {
        remove_pending(s, p);
    }
    if let Some(i) = i {
        s.clients[i].state = ClientState::Withdrawn as u8;
    }
    Ok(())
}

/// A client says it has the model loaded; once all (up to 32) have, training starts.
pub fn warmup_witness(s: &mut CoordinatorState, now: u64, signer: &[u8], index: u32) -> Result {
    let st = running(s, now)?;
    if st == RunState::RoundTrain && s.current_round().height == 0 {
        sender(s, signer, index)?;
        return Ok(()); // a late warmup witness: training already started, nothing to do
    }
    if st != RunState::Warmup {
        return Err(E::InvalidRunState);
    }
    let index = sender(s, signer, index)?;
    require_phase(s, index, &[ClientPhase::Active, ClientPhase::WarmingUp])?;
    check_push_witness(s.current_round(), index)?;
    push_witness(s.current_round_mut(), index, |_| {});
    if warmup_ready(s) {
        start_round_train(s, now); // below min_clients the next tick ends the warmup instead
    }
    Ok(())
}

/// Enough clients to train, and every one (up to 32) has said its model is loaded. Warmup
/// witnesses of clients that left (or went back to syncing) since do not count.
fn warmup_ready(s: &CoordinatorState) -> bool {
    let training = s.training_count();
    let clients = s.clients();
    let ready = s
        .current_round()
        .witnesses()
        .iter()
        .filter(|w| {
            clients
                .get(w.index as usize)
                .is_some_and(|c| c.is_training())
        })
        .count();
    training >= s.config.min_clients as usize && ready >= training.min(MAX_WITNESSES)
}

/// `_drop_unready`: the Warmup timed out; training clients that never said their model is
/// loaded (killed, crashed, cut off, too slow) are dropped, and out of the next epoch too,
/// instead of holding rounds they cannot train.
fn drop_unready(s: &mut CoordinatorState) {
    for i in 0..s.clients().len() {
        let ready = s
            .current_round()
            .witnesses()
            .iter()
            .any(|w| w.index as usize == i);
        if ready || !s.clients[i].is_training() {
            continue;
        }
        s.clients[i].state = ClientState::Dropped as u8;
        // pending signers are unique (join refuses duplicates): at most one to remove
        let signer = s.clients[i].signer;
        if let Some(p) = s.pending_index(&signer) {
            remove_pending(s, p);
        }
    }
}

/// An elected witness reports what it received (blooms of trainers and of commitments) and
/// the hash of the parameters it trains this step with; a quorum on one hash makes it the
/// run's agreed model.
#[allow(clippy::too_many_arguments)]
pub fn witness(
    s: &mut CoordinatorState,
    now: u64,
    signer: &[u8],
    index: u32,
    step: u32,
    participant_bloom: &[u8],
    broadcast_bloom: &[u8],
    broadcast_merkle: &[u8],
    param_hash: &[u8],
) -> Result {
    let st = in_round(s, now)?;
    if step != s.header.step {
        return Err(E::InvalidRunState);
    }
    let index = sender(s, signer, index)?;
    // a slot reused by a rejoining client keeps its bit in this round's participants: only a
    // client that trains (Active or WarmingUp) may witness
    require_phase(s, index, &[ClientPhase::Active, ClientPhase::WarmingUp])?;
    let witness_nodes = s.config.witness_nodes;
    let cur = s.current_round();
    if !is_witness(cur, witness_nodes, index) {
        return Err(E::NotAWitness);
    }
    let participant_bloom = check_bloom_bytes(participant_bloom)?;
    let broadcast_bloom = check_bloom_bytes(broadcast_bloom)?;
    let broadcast_merkle: &[u8; MERKLE_ROOT_LEN] = broadcast_merkle
        .try_into()
        .map_err(|_| E::InvalidOperation)?;
    let param_hash: &[u8; PARAM_HASH_LEN] =
        param_hash.try_into().map_err(|_| E::InvalidOperation)?;
    check_push_witness(cur, index)?;
    let elected = expected_witnesses(witness_nodes, cur.participant_total());
    push_witness(s.current_round_mut(), index, |w| {
        w.broadcast_merkle = *broadcast_merkle;
        w.param_hash = *param_hash;
        w.participant_bloom = *participant_bloom;
        w.broadcast_bloom = *broadcast_bloom;
    });
    agree_on_params(s, elected, param_hash);
    lagging_witnesses_sync(s);
    if st == RunState::RoundTrain && s.current_round().witnesses().len() >= elected {
        // opportunistic witnessing: every elected witness has all results, no need to wait
        change_state(s, now, RunState::RoundWitness);
    }
    Ok(())
}

/// `_agree_on_params`: the first time a quorum (and majority) of this round's witnesses commit
/// one nonzero hash, it becomes the agreed parameters of this step (and the snapshot point when
/// the step is a multiple of `checkpoint_interval`).
fn agree_on_params(s: &mut CoordinatorState, elected: usize, h: &[u8; PARAM_HASH_LEN]) {
    let step = s.header.step;
    if *h == ZERO_HASH || (s.param_step == step && s.param_hash == *h) {
        return;
    }
    let votes = s
        .current_round()
        .witnesses()
        .iter()
        .filter(|w| w.param_hash == *h)
        .count();
    if votes < param_quorum(elected) {
        return;
    }
    s.param_hash = *h;
    s.param_step = step;
    let interval = s.config.checkpoint_interval;
    if interval != 0 && step.is_multiple_of(interval) {
        s.due_hash = *h;
        s.due_step = step;
    }
}

/// `_lagging_witnesses_sync`: once this step's parameters are agreed, a training witness that
/// committed other (nonzero) parameters lags and goes back to Syncing.
fn lagging_witnesses_sync(s: &mut CoordinatorState) {
    if s.param_step != s.header.step {
        return;
    }
    let agreed = s.param_hash;
    for j in 0..s.current_round().witnesses().len() {
        let w = &s.current_round().witnesses[j];
        let (index, h) = (w.index as usize, w.param_hash);
        let trains = s.clients().get(index).is_some_and(|c| c.is_training());
        if trains && h != ZERO_HASH && h != agreed {
            set_phase(s, index, ClientPhase::Syncing);
        }
    }
}

/// `_require_phase`: `WrongPhase` unless the client at `index` is in one of `phases`.
fn require_phase(s: &CoordinatorState, index: usize, phases: &[ClientPhase]) -> Result {
    if !phases.contains(&s.clients[index].phase()) {
        return Err(E::WrongPhase);
    }
    Ok(())
}

/// A syncing client replayed the applied results up to the agreed parameters: its hash for
/// `step` is the quorum's (`SyncHashMismatch` otherwise: a stale step or other parameters).
/// It warms up next: it trains, its results are not applied yet.
pub fn synced(
    s: &mut CoordinatorState,
    now: u64,
    signer: &[u8],
    index: u32,
    step: u32,
    param_hash: &[u8],
) -> Result {
    in_round(s, now)?;
    let index = sender(s, signer, index)?;
    require_phase(s, index, &[ClientPhase::Syncing])?;
    let param_hash: &[u8; PARAM_HASH_LEN] =
        param_hash.try_into().map_err(|_| E::InvalidOperation)?;
    if s.param_hash == ZERO_HASH || step != s.param_step || *param_hash != s.param_hash {
        return Err(E::SyncHashMismatch);
    }
    set_phase(s, index, ClientPhase::WarmingUp);
    Ok(())
}

/// A client lags (its parameters are not the quorum's, or it misses results it cannot fetch):
/// it goes back to Syncing at once, without queueing. In Warmup and in rounds.
pub fn resync(s: &mut CoordinatorState, now: u64, signer: &[u8], index: u32) -> Result {
    let st = running(s, now)?;
    if !matches!(
        st,
        RunState::Warmup | RunState::RoundTrain | RunState::RoundWitness
    ) {
        return Err(E::InvalidRunState);
    }
    let index = sender(s, signer, index)?;
    require_phase(s, index, &[ClientPhase::Active, ClientPhase::WarmingUp])?;
    set_phase(s, index, ClientPhase::Syncing);
    Ok(())
}

/// How many of a round's witnesses received a result from this signer.
pub fn trainer_score(rnd: &Round, signer: &[u8; KEY_LEN]) -> usize {
    Vouchers::of(rnd).score(rnd, &signer_bits(signer))
}

/// A round's witnesses' participant blooms, each kept once with how many witnesses sent it.
/// Honest witnesses mostly send the same bloom, so scoring every trainer against the distinct
/// ones looks each key up once or twice instead of once per witness: under Solana's VM the end
/// of a round of 256 trainers and 32 witnesses took more than a transaction's 1.4M compute
/// units the other way (benchmarks/compute_units).
struct Vouchers {
    /// Index into `Round::witnesses` of a bloom's first sender, and how many sent that bloom.
    distinct: [(u8, u8); MAX_WITNESSES],
    len: usize,
}

impl Vouchers {
    fn of(rnd: &Round) -> Vouchers {
        let mut v = Vouchers {
            distinct: [(0, 0); MAX_WITNESSES],
            len: 0,
        };
        let witnesses = rnd.witnesses();
        for (i, w) in witnesses.iter().enumerate() {
            let same = v.distinct[..v.len]
                .iter()
                .position(|&(j, _)| witnesses[j as usize].participant_bloom == w.participant_bloom);
            match same {
                Some(k) => v.distinct[k].1 += 1,
                None => {
                    v.distinct[v.len] = (i as u8, 1);
                    v.len += 1;
                }
            }
        }
        v
    }

    /// How many of the round's witnesses vouch for the signer whose bloom bits are `bits`
    /// (`trainer_score`; a client's are in its slot, `Client::bloom_bits`).
    fn score(&self, rnd: &Round, bits: &[u16; BLOOM_SLICES]) -> usize {
        let witnesses = rnd.witnesses();
        self.distinct[..self.len]
            .iter()
            .filter(|&&(j, _)| has_bits(&witnesses[j as usize].participant_bloom, bits))
            .map(|&(_, senders)| senders as usize)
            .sum()
    }
}

/// What the health of every client is judged against: which clients had a batch two rounds back
/// (in a round that trained) and the quorum of the round after.
struct HealthView {
    judged: bool,
    had_batch: [u8; MAX_CLIENTS / 8],
    quorum: usize,
    trained_step: u64,
    /// The blooms of the round after (`round_back(1)`), when judged.
    vouchers: Option<Vouchers>,
}

fn health_view(s: &CoordinatorState) -> HealthView {
    let mut view = HealthView {
        judged: false,
        had_batch: [0; MAX_CLIENTS / 8],
        quorum: 0,
        trained_step: 0,
        vouchers: None,
    };
    if let (Some(trained), Some(witnessed)) = (s.round_back(2), s.round_back(1)) {
        if s.round_trains(trained) {
            view.judged = true;
            view.trained_step = s.round_step(trained);
            view.had_batch = batch_mask(&s.config, trained);
            let elected = expected_witnesses(s.config.witness_nodes, witnessed.participant_total());
            view.quorum = witness_quorum(elected);
            view.vouchers = Some(Vouchers::of(witnessed));
        }
    }
    view
}

fn healthy_in(s: &CoordinatorState, view: &HealthView, index: usize) -> bool {
    if !view.judged || !bit(&view.had_batch, index) {
        return true;
    }
    // the first round it answers for: an Active client's from the step it became Active, any
    // other phase's from the round after it entered it. Earlier batches of its slot were an
    // earlier holder's (a client that left and joined again) or came before it lagged
    let c = &s.clients[index];
    let first = c.since as u64 + (c.phase() != ClientPhase::Active) as u64;
    if first > view.trained_step {
        return true;
    }
    match (s.round_back(1), &view.vouchers) {
        (Some(witnessed), Some(vouchers)) => {
            vouchers.score(witnessed, &s.clients[index].bloom_bits) >= view.quorum
        }
        _ => true,
    }
}

/// Healthy unless the client had a batch two rounds back, answered for that round (see
/// `healthy_in`), and the witnesses of the round after (who received that round's results) fall
/// short of a quorum in vouching for it.
pub fn is_healthy(s: &CoordinatorState, index: usize) -> bool {
    healthy_in(s, &health_view(s), index)
}

/// A client names peers that did not deliver; if the witnesses agree, they are dropped.
pub fn health_check(
    s: &mut CoordinatorState,
    now: u64,
    signer: &[u8],
    index: u32,
    targets: &[u16],
) -> Result {
    in_round(s, now)?;
    sender(s, signer, index)?;
    if s.round_back(2).is_none() {
        return Err(E::InvalidHealthCheck);
    }
    if targets.is_empty() || targets.len() > MAX_CLIENTS {
        return Err(E::InvalidHealthCheck);
    }
    let view = health_view(s);
    let n = s.clients().len();
    for &t in targets {
        let t = t as usize;
        if t >= n {
            return Err(E::InvalidClientIndex);
        }
        if healthy_in(s, &view, t) {
            return Err(E::InvalidHealthCheck);
        }
    }
    for &t in targets {
        let t = t as usize;
        if s.clients[t].is_healthy() {
            s.clients[t].state = ClientState::Dropped as u8;
            // pending signers are unique (join refuses duplicates): at most one to remove
            let signer = s.clients[t].signer;
            if let Some(p) = s.pending_index(&signer) {
                remove_pending(s, p);
            }
        }
    }
    Ok(())
}

/// An elected verifier of the round that trains `step` (this one or the one before) says the
/// result that client `target` (one of its `verification_sample`) sent for it is bad. The
/// round's `accused` mask gets the target, so every client leaves that result out of the
/// round's apply (the mask is frozen when the round is final: evidence for it stops then).
/// Once `evidence_quorum` distinct verifiers have accused the target in the epoch, it is Evicted: out of the epoch, its slot's unsettled points forfeited, its
/// join for the next epoch removed; it cannot join again before the next epoch starts.
pub fn evidence(
    s: &mut CoordinatorState,
    now: u64,
    signer: &[u8],
    index: u32,
    step: u32,
    target: u16,
) -> Result {
    in_round(s, now)?;
    let index = sender(s, signer, index)?;
    let cur = s.header.step;
    let back = if step == cur {
        0
    } else if cur >= 1 && step == cur - 1 {
        1
    } else {
        return Err(E::InvalidEvidence);
    };
    let rnd = match s.round_back(back) {
        Some(rnd) if s.round_trains(rnd) => rnd,
        _ => return Err(E::InvalidEvidence),
    };
    if is_verifier(rnd, s.config.verification_percent, index) != Some(true) {
        return Err(E::NotAVerifier);
    }
    let target = target as usize;
    if target >= s.clients().len() {
        return Err(E::InvalidClientIndex);
    }
    // the sample holds only trainers with a batch: that check is this one too
    if !in_verification_sample(&s.config, rnd, index, target) || !s.clients[target].is_healthy() {
        return Err(E::InvalidEvidence);
    }
    if bit(&s.clients[target].accusers, index) && bit(&rnd.accused, target) {
        return Err(E::AlreadyAccused);
    }
    let quorum = s.config.evidence_quorum as usize;
    if let Some(rnd) = s.round_back_mut(back) {
        set_bit(&mut rnd.accused, target);
    }
    let c = &mut s.clients[target];
    set_bit(&mut c.accusers, index);
    if popcount(&c.accusers) >= quorum {
        c.state = ClientState::Evicted as u8;
        c.presence = 0;
        c.sequences = 0;
        // pending signers are unique (join refuses duplicates): at most one to remove
        let signer = c.signer;
        if let Some(p) = s.pending_index(&signer) {
            remove_pending(s, p);
        }
    }
    Ok(())
}

/// A checkpointer stored a snapshot of the agreed parameters at `repo` (its location in the
/// run's store): recorded only when `(step, param_hash)` is the latest agreed pair or the
/// snapshot point's (else `CheckpointHashMismatch`). A Cooldown snapshot of the epoch's final
/// parameters ends the Cooldown.
#[allow(clippy::too_many_arguments)]
pub fn checkpoint(
    s: &mut CoordinatorState,
    now: u64,
    signer: &[u8],
    index: u32,
    repo: &[u8],
    revision: &[u8],
    step: u32,
    param_hash: &[u8],
) -> Result {
    check_time(s, now)?;
    if s.run_state().halted() {
        return Err(E::Halted);
    }
    let index = sender(s, signer, index)?;
    let percent = s.config.checkpointer_percent;
    let cur = s.current_round();
    if percent != 0 && cur.participants.iter().all(|&b| b == 0) {
        // a new epoch's Warmup has no round yet to elect checkpointers from
        return Err(E::NotACheckpointer);
    }
    if !is_checkpointer(cur, percent, index) {
        return Err(E::NotACheckpointer);
    }
    if repo.is_empty() {
        return Err(E::InvalidCheckpoint);
    }
    let hash: &[u8; PARAM_HASH_LEN] = param_hash.try_into().map_err(|_| E::InvalidOperation)?;
    let recorded = CheckpointArgs {
        kind: s.checkpoint_kind(),
        repo,
        revision,
        hash,
        step,
    };
    check_checkpoint(&recorded)?;
    let latest = step == s.param_step && *hash == s.param_hash;
    let due = step == s.due_step && *hash == s.due_hash;
    if *hash == ZERO_HASH || !(latest || due) {
        return Err(E::CheckpointHashMismatch);
    }
    write_checkpoint(s, &recorded);
    if latest && s.run_state() == RunState::Cooldown {
        end_epoch(s, now); // the Cooldown's job is done
    }
    Ok(())
}

/// Anyone moves the points a slot holds into its identity's entry, which lives outside this
/// state (a per-contributor account on chain, the server's ledger): the backend reads them first
/// ([`crate::points::pending_credit`]), credits them ([`crate::points::credit`]) in the same
/// transaction, and the slot starts again from zero. Allowed in every run state.
pub fn settle(s: &mut CoordinatorState, now: u64, index: u32) -> Result {
    check_time(s, now)?;
    let index = index as usize;
    if index >= s.clients().len() {
        return Err(E::InvalidClientIndex);
    }
    let c = &mut s.clients[index];
    if !c.unsettled() {
        return Err(E::NothingToSettle);
    }
    c.presence = 0;
    c.sequences = 0;
    Ok(())
}

pub fn pause(s: &mut CoordinatorState, now: u64) -> Result {
    let st = running(s, now)?;
    if st.active() {
        s.header.pending_pause = 1; // finish the round, then cooldown, then pause
    } else {
        withdraw_all(s);
        change_state(s, now, RunState::Paused);
    }
    Ok(())
}

pub fn resume(s: &mut CoordinatorState, now: u64) -> Result {
    check_time(s, now)?;
    if !matches!(s.run_state(), RunState::Paused | RunState::Uninitialized) {
        return Err(E::CannotResume);
    }
    start_waiting_for_members(s, now);
    Ok(())
}

/// The run authority changes the config, the model source or the run spec's hash while the run
/// is halted (clients check the spec when they start: a running run keeps its own).
pub fn update(
    s: &mut CoordinatorState,
    now: u64,
    config: Option<&RunConfig>,
    checkpoint: Option<&CheckpointArgs>,
    spec_hash: Option<&[u8]>,
) -> Result {
    check_time(s, now)?;
    let st = s.run_state();
    if st == RunState::Finished {
        return Err(E::RunFinished);
    }
    if !st.halted() {
        return Err(E::UpdateNotHalted);
    }
    if let Some(config) = config {
        if s.unsettled_count() != 0 && *config != s.config {
            // points are credited at the rates they were earned under
            return Err(E::PointsUnsettled);
        }
        config.validate()?;
    }
    if let Some(ck) = checkpoint {
        check_checkpoint(ck)?;
    }
    let spec_hash: Option<&[u8; PARAM_HASH_LEN]> = match spec_hash {
        Some(h) => Some(h.try_into().map_err(|_| E::InvalidOperation)?),
        None => None,
    };
    // nothing changes unless every argument is valid
    if let Some(config) = config {
        s.config = *config;
    }
    if let Some(ck) = checkpoint {
        write_checkpoint(s, ck);
    }
    if let Some(h) = spec_hash {
        s.spec_hash = *h;
    }
    Ok(())
}

/// The earliest time at which `tick` could change the state, or None if only another operation
/// can (halted, or waiting for more joins). Clients and servers tick when it is due.
pub fn tick_deadline(s: &CoordinatorState) -> Option<u64> {
    let cfg = &s.config;
    let start = s.header.run_state_start;
    let duration = match s.run_state() {
        RunState::WaitingForMembers => {
            if s.pending().len() < cfg.init_min_clients as usize || s.unsettled_count() != 0 {
                return None; // only joins (or settling the slots' points) can start the epoch
            }
            cfg.waiting_for_members_extra_time as u64
        }
        RunState::Warmup => {
            if s.training_count() < cfg.min_clients as usize || warmup_ready(s) {
                return Some(start);
            }
            cfg.warmup_time
        }
        RunState::RoundTrain => cfg.max_round_train_time,
        RunState::RoundWitness => cfg.round_witness_time,
        RunState::Cooldown => cfg.cooldown_time,
        RunState::Uninitialized | RunState::Finished | RunState::Paused => return None,
    };
    Some(start.saturating_add(duration.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Vec<u64> {
        vec![0u64; STATE_SIZE / 8]
    }

    fn st(buf: &mut [u64]) -> &mut CoordinatorState {
        bytemuck::from_bytes_mut(bytemuck::cast_slice_mut(buf))
    }

    #[test]
    fn new_run_and_round_seed_known_answers_from_python() {
        let mut buf = fresh();
        let s = st(&mut buf);
        new_run(
            s,
            b"seed-test",
            &RunConfig::DEFAULT,
            1234567890123456789,
            &CheckpointArgs::DUMMY,
        )
        .unwrap();
        // state_hash(new_run("seed-test", RunConfig(), 1234567890123456789))
        assert_eq!(
            hex::encode(crate::state::state_hash(s)),
            "193fc1a69115627874dd57a2ab15bde8af98db93a9a7a95a0bbc94152ae79b65"
        );
        s.header.epoch = 7;
        s.header.step = 42;
        assert_eq!(
            hex::encode(crate::state::state_hash(s)),
            "c53315dbeab1f4482550720f2569fdee646af6a14a62054168430d7a2f5ffe0d"
        );
        assert_eq!(round_seed(s, 1700000123), 13452663378481529829);
    }

    #[test]
    fn new_run_rejects_bad_ids_config_and_checkpoint() {
        let mut buf = fresh();
        let s = st(&mut buf);
        let c = RunConfig::DEFAULT;
        let d = CheckpointArgs::DUMMY;
        assert_eq!(new_run(s, b"", &c, 0, &d), Err(E::InvalidRunId));
        assert_eq!(new_run(s, &[b'a'; 33], &c, 0, &d), Err(E::InvalidRunId));
        assert_eq!(new_run(s, b"a\0b", &c, 0, &d), Err(E::InvalidRunId));
        assert_eq!(new_run(s, b"\xff", &c, 0, &d), Err(E::InvalidRunId));
        let mut bad = c;
        bad.epoch_time = 0;
        assert_eq!(new_run(s, b"x", &bad, 0, &d), Err(E::InvalidConfig));
        let hub = CheckpointArgs {
            kind: CheckpointKind::Hub,
            repo: b"",
            ..d
        };
        assert_eq!(new_run(s, b"x", &c, 0, &hub), Err(E::InvalidCheckpoint));
        // a Stored checkpoint needs its parameter hash
        let stored = CheckpointArgs {
            kind: CheckpointKind::Stored,
            repo: b"store/x",
            ..d
        };
        assert_eq!(new_run(s, b"x", &c, 0, &stored), Err(E::InvalidCheckpoint));
        assert!(
            s.as_bytes().iter().all(|&b| b == 0),
            "rejected new_run wrote"
        );
        assert_eq!(new_run(s, &[b'a'; 32], &c, 0, &d), Ok(()));
        assert_eq!(tick(s, 0), Err(E::Halted));
        assert_eq!(s.header.layout_version, LAYOUT_VERSION);
        // an account of another layout version: every operation refuses it, after the time
        s.header.layout_version = 1;
        let before = s.as_bytes().to_vec();
        assert_eq!(resume(s, 5), Err(E::LayoutVersionMismatch));
        assert_eq!(
            join(s, 5, &[1; 32], &[2; 32], None),
            Err(E::LayoutVersionMismatch)
        );
        assert_eq!(tick(s, MAX_TIME), Err(E::InvalidOperation));
        assert_eq!(s.as_bytes(), &before[..]);
        s.header.layout_version = LAYOUT_VERSION;
        assert_eq!(resume(s, MAX_TIME), Err(E::InvalidOperation));
        assert_eq!(resume(s, 5), Ok(()));
        assert_eq!(s.run_state(), RunState::WaitingForMembers);
        assert_eq!(tick_deadline(s), None);
    }

    /// A RoundTrain state at height 2 with one healthy client (signer [7; 32]) and no batches.
    fn round_two(buf: &mut [u64]) -> &mut CoordinatorState {
        let s = st(buf);
        new_run(s, b"r", &RunConfig::DEFAULT, 1, &CheckpointArgs::DUMMY).unwrap();
        s.header.run_state = RunState::RoundTrain as u8;
        s.header.clients_len = 1;
        s.clients[0].signer = [7; 32];
        s.header.rounds_head = 2;
        s.rounds[2].height = 2;
        s.rounds[1].height = 1;
        s
    }

    #[test]
    fn health_check_target_list_bounds() {
        let mut buf = fresh();
        let s = round_two(&mut buf);
        let before = s.as_bytes().to_vec();
        let signer = [7u8; 32];
        assert_eq!(
            health_check(s, 9, &signer, 0, &[0; 257]),
            Err(E::InvalidHealthCheck)
        );
        assert_eq!(
            health_check(s, 9, &signer, 0, &[]),
            Err(E::InvalidHealthCheck)
        );
        assert_eq!(
            health_check(s, 9, &signer, 0, &[1]),
            Err(E::InvalidClientIndex)
        );
        // 256 targets pass the length check and reach the per-target checks: client 0 had no
        // batch two rounds back, so it is healthy
        assert_eq!(
            health_check(s, 9, &signer, 0, &[0; 256]),
            Err(E::InvalidHealthCheck)
        );
        assert_eq!(
            health_check(s, 9, &signer[..31], 0, &[0]),
            Err(E::InvalidOperation)
        );
        assert_eq!(
            health_check(s, 9, &signer, 1, &[0]),
            Err(E::InvalidClientIndex)
        );
        assert_eq!(health_check(s, 9, &[8; 32], 0, &[0]), Err(E::NotAClient));
        s.rounds[2].height = 1;
        assert_eq!(
            health_check(s, 9, &signer, 0, &[0]),
            Err(E::InvalidHealthCheck)
        );
        s.rounds[2].height = 2;
        assert_eq!(s.as_bytes(), &before[..]);
    }

    #[test]
    fn drain_rounds_do_not_train() {
        // round_trains: last_step == 0 or start_step + height < last_step - 2
        let mut buf = fresh();
        let s = round_two(&mut buf);
        s.header.start_step = 5;
        let mut r = Box::new(<Round as bytemuck::Zeroable>::zeroed());
        for height in 0..10u32 {
            r.height = height;
            s.header.last_step = 0;
            assert!(s.round_trains(&r));
            s.header.last_step = 10; // steps 5, 6, 7 train; 8 and 9 are the drain
            assert_eq!(s.round_trains(&r), 5 + height < 8, "height {height}");
        }
    }

    #[test]
    fn tick_deadline_per_state() {
        let mut buf = fresh();
        let s = st(&mut buf);
        let mut c = RunConfig::DEFAULT;
        c.warmup_time = 0;
        new_run(s, b"r", &c, 1, &CheckpointArgs::DUMMY).unwrap();
        assert_eq!(tick_deadline(s), None); // Uninitialized
        resume(s, 100).unwrap();
        assert_eq!(tick_deadline(s), None); // WaitingForMembers, nobody joined
        join(s, 100, &[1; 32], &[2; 32], None).unwrap();
        assert_eq!(tick_deadline(s), Some(103));
        tick(s, 103).unwrap();
        assert_eq!(s.run_state(), RunState::Warmup);
        assert_eq!(tick_deadline(s), Some(104)); // warmup_time 0: one second at least
        withdraw(s, 103, &[1; 32]).unwrap();
        assert_eq!(tick_deadline(s), Some(103)); // below min_clients: due now
        tick(s, 103).unwrap();
        assert_eq!(s.run_state(), RunState::WaitingForMembers);
        pause(s, 104).unwrap();
        assert_eq!(tick_deadline(s), None);
    }
}
