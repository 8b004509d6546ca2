//! Without any runtime: the account layouts, the error codes, and the handlers' logic
//! (`psyche_coordinator::logic`) on a boxed state.

use anchor_lang::prelude::Pubkey;
use anchor_lang::{AnchorSerialize, Discriminator};
use psyche_coordinator::logic;
use psyche_coordinator::{
    Contributor, CoordinatorAccount, CoordinatorInstance, CoordinatorProgramError as PE,
    JoinAuthorization, RunConfigParams, RunSpec,
};
use psyche_coordinator_core::{
    self as core_sm, CheckpointArgs, ClientPhase, CoordinatorError, CoordinatorState, RunConfig,
    RunState, STATE_SIZE,
};
use sha2::{Digest, Sha256};

/// A zeroed state on the heap, 8-byte aligned.
struct Boxed(Vec<u64>);

impl Boxed {
    fn new() -> Self {
        Boxed(vec![0; STATE_SIZE / 8])
    }
    fn s(&mut self) -> &mut CoordinatorState {
        bytemuck::from_bytes_mut(bytemuck::cast_slice_mut(&mut self.0))
    }
}

fn fresh_run(config: &RunConfig) -> Boxed {
    let mut b = Boxed::new();
    core_sm::new_run(b.s(), b"run", config, 7, &CheckpointArgs::DUMMY).unwrap();
    b
}

fn quick_config() -> RunConfig {
    RunConfig {
        min_clients: 1,
        init_min_clients: 1,
        waiting_for_members_extra_time: 3,
        ..RunConfig::DEFAULT
    }
}

// ---------------------------------------------------------------- layout

#[test]
fn discriminators_are_anchors() {
    let disc = |name: &str| Sha256::digest(name.as_bytes())[..8].to_vec();
    assert_eq!(
        CoordinatorAccount::DISCRIMINATOR,
        disc("account:CoordinatorAccount")
    );
    assert_eq!(
        CoordinatorInstance::DISCRIMINATOR,
        disc("account:CoordinatorInstance")
    );
    assert_eq!(
        JoinAuthorization::DISCRIMINATOR,
        disc("account:JoinAuthorization")
    );
    assert_eq!(Contributor::DISCRIMINATOR, disc("account:Contributor"));
    assert_eq!(RunSpec::DISCRIMINATOR, disc("account:RunSpec"));
}

#[test]
fn run_spec_chunks_build_the_spec_and_bad_ones_change_nothing() {
    // bump, instance, 4 + 8192 bytes
    assert_eq!(RunSpec::SPACE, 8 + 1 + 32 + 4 + 8192);
    let mut bytes = Vec::new();
    logic::write_chunk(&mut bytes, 6, 3, b"def").unwrap();
    logic::write_chunk(&mut bytes, 6, 0, b"abc").unwrap();
    assert_eq!(bytes, b"abcdef");
    // a shorter spec drops the tail; a longer one is zero-filled until written
    logic::write_chunk(&mut bytes, 4, 0, b"xy").unwrap();
    assert_eq!(bytes, b"xycd");
    logic::write_chunk(&mut bytes, 5, 4, b"").unwrap();
    assert_eq!(bytes, b"xycd\0");
    assert_eq!(
        logic::write_chunk(&mut bytes, 4, 3, b"zz"),
        Err(PE::RunSpecChunkOutOfRange)
    );
    assert_eq!(
        logic::write_chunk(&mut bytes, 8193, 0, b"a"),
        Err(PE::RunSpecTooLarge)
    );
    assert_eq!(
        logic::write_chunk(&mut bytes, 8, u32::MAX, b"a"),
        Err(PE::RunSpecChunkOutOfRange)
    );
    assert_eq!(bytes, b"xycd\0");
    logic::write_chunk(&mut bytes, 8192, 8191, b"a").unwrap();
    assert_eq!(bytes.len(), 8192);
}

#[test]
fn contributor_account_layout() {
    // bump, instance, identity, 4 + 8 delegates, six u64s
    assert_eq!(Contributor::SPACE, 8 + 1 + 32 + 32 + 4 + 8 * 32 + 6 * 8);
    let c = Contributor {
        bump: 7,
        coordinator_instance: Pubkey::new_from_array([1; 32]),
        identity: Pubkey::new_from_array([2; 32]),
        delegates: vec![Pubkey::new_from_array([3; 32])],
        presence_rounds: 4,
        sequences: 5,
        tokens: 6,
        token_carry: 7,
        presence_points: 8,
        compute_points: 9,
    };
    let mut data = Contributor::DISCRIMINATOR.to_vec();
    data.extend(c.try_to_vec().unwrap());
    // the offsets getProgramAccounts filters use
    let at = Contributor::INSTANCE_OFFSET;
    assert_eq!(&data[at..at + 32], &[1; 32]);
    let at = Contributor::IDENTITY_OFFSET;
    assert_eq!(&data[at..at + 32], &[2; 32]);
}

#[test]
fn coordinator_account_is_the_core_state() {
    assert_eq!(core::mem::size_of::<CoordinatorAccount>(), 187_328);
    assert_eq!(core::mem::size_of::<CoordinatorAccount>(), STATE_SIZE);
    assert_eq!(core::mem::align_of::<CoordinatorAccount>(), 8);
    assert_eq!(CoordinatorAccount::SPACE, 187_336);
    // the view is the same memory
    let mut words = vec![0u64; STATE_SIZE / 8];
    let account: &mut CoordinatorAccount =
        bytemuck::from_bytes_mut(bytemuck::cast_slice_mut(&mut words));
    let base = account.state.as_ptr();
    account.state_mut().header.step = 0x0102_0304;
    assert_eq!(account.state().header.step, 0x0102_0304);
    assert_eq!(&account.state[68..72], &[4, 3, 2, 1]);
    assert_eq!(
        account.state() as *const CoordinatorState as *const u8,
        base
    );
}

#[test]
fn small_accounts_have_fixed_borsh_layouts() {
    assert_eq!(
        CoordinatorInstance::SPACE,
        8 + 1 + 32 + 32 + 1 + 32 + 4 + 32
    );
    assert_eq!(JoinAuthorization::SPACE, 8 + 1 + 32 + 32);
    let (a, j, c) = (
        Pubkey::new_unique(),
        Pubkey::new_unique(),
        Pubkey::new_unique(),
    );
    let instance = CoordinatorInstance {
        bump: 254,
        main_authority: a,
        join_authority: j,
        permissionless: true,
        coordinator_account: c,
        run_id: "x".repeat(32),
    };
    let bytes = instance.try_to_vec().unwrap();
    assert_eq!(bytes.len(), CoordinatorInstance::SPACE - 8);
    assert_eq!(bytes[0], 254);
    assert_eq!(&bytes[1..33], a.as_ref());
    assert_eq!(&bytes[33..65], j.as_ref());
    assert_eq!(bytes[65], 1);
    assert_eq!(&bytes[66..98], c.as_ref());
    assert_eq!(&bytes[98..102], &32u32.to_le_bytes());
}

#[test]
fn run_config_params_round_trip() {
    let c = RunConfig {
        warmup_time: 1,
        cooldown_time: 2,
        max_round_train_time: 3,
        round_witness_time: 4,
        epoch_time: 5,
        global_batch_size_warmup_tokens: 6,
        total_steps: 7,
        max_seq_len: 8,
        checkpoint_interval: 7,
        min_clients: 9,
        init_min_clients: 10,
        witness_nodes: 11,
        global_batch_size_start: 12,
        global_batch_size_end: 13,
        max_clients: 17,
        max_syncing: 18,
        kept_rounds: 19,
        verification_percent: 14,
        checkpointer_percent: 15,
        waiting_for_members_extra_time: 16,
        sync_warmup_rounds: 20,
        flops_per_token: 21,
        tokens_per_compute_point: 22,
        points_cap: 23,
        presence_points: 24,
        evidence_quorum: 25,
        verify_sample: 26,
        _pad: [0; 1],
    };
    assert_eq!(RunConfigParams::from_core(&c).to_core(), c);
    // borsh: the 112 canonical bytes without the byte of padding at their end, in order
    let borsh = RunConfigParams::from_core(&c).try_to_vec().unwrap();
    assert_eq!(borsh, &bytemuck::bytes_of(&c)[..111]);
}

#[test]
fn the_prologue_refuses_another_layout_version_before_the_size() {
    let mut data = vec![0u8; CoordinatorAccount::SPACE];
    data[8 + 92..8 + 96].copy_from_slice(&8u32.to_le_bytes());
    assert_eq!(logic::layout_version_of(&data), Some(8));
    assert_eq!(logic::check_layout(&data), Ok(()));
    // version 7 had no client bloom bits and was 8,192 bytes shorter
    let mut v7 = vec![0u8; 8 + 179_136];
    v7[8 + 92..8 + 96].copy_from_slice(&7u32.to_le_bytes());
    assert_eq!(logic::check_layout(&v7), Err(PE::LayoutVersionMismatch));
    // version 6 had no spec hash and was 32 bytes shorter
    let mut v6 = vec![0u8; 8 + 179_104];
    v6[8 + 92..8 + 96].copy_from_slice(&6u32.to_le_bytes());
    assert_eq!(logic::check_layout(&v6), Err(PE::LayoutVersionMismatch));
    // version 5 had no accused masks in the rounds and was 128 bytes shorter
    let mut v5 = vec![0u8; 8 + 178_976];
    v5[8 + 92..8 + 96].copy_from_slice(&5u32.to_le_bytes());
    assert_eq!(logic::check_layout(&v5), Err(PE::LayoutVersionMismatch));
    // version 4 had no accusers and was 16,384 bytes shorter
    let mut v4 = vec![0u8; 8 + 162_592];
    v4[8 + 92..8 + 96].copy_from_slice(&4u32.to_le_bytes());
    assert_eq!(logic::check_layout(&v4), Err(PE::LayoutVersionMismatch));
    // version 3 had no points and was 24,608 bytes shorter
    let mut v3 = vec![0u8; 8 + 137_984];
    v3[8 + 92..8 + 96].copy_from_slice(&3u32.to_le_bytes());
    assert_eq!(logic::check_layout(&v3), Err(PE::LayoutVersionMismatch));
    // version 2 had no client phases and was 128 bytes shorter
    let mut v2 = vec![0u8; 8 + 137_856];
    v2[8 + 92..8 + 96].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(logic::check_layout(&v2), Err(PE::LayoutVersionMismatch));
    // version 1 had zero padding at offset 92, and was 4,216 bytes shorter
    data[8 + 92..8 + 96].fill(0);
    assert_eq!(logic::layout_version_of(&data), Some(1));
    assert_eq!(logic::check_layout(&data), Err(PE::LayoutVersionMismatch));
    let v1 = vec![0u8; 8 + 133_640];
    assert_eq!(logic::check_layout(&v1), Err(PE::LayoutVersionMismatch));
    data[8 + 92..8 + 96].copy_from_slice(&9u32.to_le_bytes());
    assert_eq!(logic::check_layout(&data), Err(PE::LayoutVersionMismatch));
    // this version at another size; too short to hold a version
    data[8 + 92..8 + 96].copy_from_slice(&8u32.to_le_bytes());
    data.push(0);
    assert_eq!(logic::check_layout(&data), Err(PE::AccountIncorrectSize));
    assert_eq!(logic::layout_version_of(&data[..99]), None);
    assert_eq!(
        logic::check_layout(&data[..99]),
        Err(PE::AccountIncorrectSize)
    );
    // what init_coordinator writes is of this version
    let mut b = fresh_run(&quick_config());
    assert_eq!(
        b.s().header.layout_version,
        psyche_coordinator_core::LAYOUT_VERSION
    );
}

// ---------------------------------------------------------------- errors

#[test]
fn every_core_error_has_a_program_error_of_the_same_name() {
    for e in CoordinatorError::ALL {
        let p = PE::from(e);
        assert_eq!(p.name(), e.code());
        assert_eq!(p.code(), 6000 + e as u32);
        // what the runtime sees: ProgramError::Custom(6000 + core code)
        let anchor: anchor_lang::error::Error = p.into();
        assert_eq!(
            anchor_lang::prelude::ProgramError::from(anchor),
            anchor_lang::prelude::ProgramError::Custom(6000 + e as u32)
        );
    }
}

#[test]
fn program_errors_follow_the_core_codes() {
    let mut names: Vec<String> = CoordinatorError::ALL
        .iter()
        .map(|e| e.code().to_string())
        .collect();
    for (i, p) in PE::OWN.iter().enumerate() {
        assert_eq!(p.code(), 6100 + i as u32, "{}", p.name());
        assert!(!names.contains(&p.name()), "duplicate {}", p.name());
        names.push(p.name());
    }
    for required in [
        "SignerMismatch",
        "NotAuthority",
        "NotAuthorized",
        "WrongCoordinatorAccount",
        "AccountIncorrectSize",
        "RunIdInvalidLength",
        "CloseNotHalted",
        "NotADelegate",
        "TooManyDelegates",
        "WrongContributor",
    ] {
        assert!(names.iter().any(|n| n == required), "{required}");
    }
}

// ---------------------------------------------------------------- logic

#[test]
fn time_and_run_id_checks() {
    assert_eq!(
        logic::now_from_unix_timestamp(-1),
        Err(PE::InvalidOperation)
    );
    assert_eq!(logic::now_from_unix_timestamp(0), Ok(0));
    assert_eq!(
        logic::now_from_unix_timestamp(i64::MAX),
        Ok(i64::MAX as u64)
    );
    assert_eq!(logic::check_run_id_length(""), Err(PE::RunIdInvalidLength));
    assert_eq!(logic::check_run_id_length(&"é".repeat(16)), Ok(()));
    assert_eq!(
        logic::check_run_id_length(&"é".repeat(17)),
        Err(PE::RunIdInvalidLength)
    );
}

#[test]
fn init_account_data_checks_size_discriminator_and_alignment() {
    let cfg = quick_config();
    let mut words = vec![0u64; CoordinatorAccount::SPACE / 8 + 1];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    let space = CoordinatorAccount::SPACE;
    assert_eq!(
        logic::init_account_data(&mut bytes[..space - 8], "r", &cfg, 1),
        Err(PE::AccountIncorrectSize)
    );
    assert_eq!(
        logic::init_account_data(&mut bytes[..space + 8], "r", &cfg, 1),
        Err(PE::AccountIncorrectSize)
    );
    assert_eq!(
        logic::init_account_data(&mut bytes[1..space + 1], "r", &cfg, 1),
        Err(PE::AccountMisaligned)
    );
    assert_eq!(
        logic::init_account_data(&mut bytes[..space], &"r".repeat(33), &cfg, 1),
        Err(PE::RunIdInvalidLength)
    );
    assert_eq!(
        logic::init_account_data(&mut bytes[..space], "a\0", &cfg, 1),
        Err(PE::InvalidRunId)
    );
    let bad = RunConfig {
        min_clients: 0,
        ..cfg
    };
    assert_eq!(
        logic::init_account_data(&mut bytes[..space], "r", &bad, 1),
        Err(PE::InvalidConfig)
    );
    assert!(
        bytes.iter().all(|&b| b == 0),
        "a refused init writes nothing"
    );
    assert_eq!(
        logic::init_account_data(&mut bytes[..space], "r", &cfg, 1),
        Ok(())
    );
    assert_eq!(&bytes[..8], CoordinatorAccount::DISCRIMINATOR);
    let mut expected = Boxed::new();
    core_sm::new_run(expected.s(), b"r", &cfg, 1, &CheckpointArgs::DUMMY).unwrap();
    assert!(bytes[8..space] == *bytemuck::bytes_of(expected.s()));
    assert_eq!(
        logic::init_account_data(&mut bytes[..space], "r", &cfg, 1),
        Err(PE::AccountAlreadyInitialized)
    );
}

#[test]
fn client_operations_tick_after_success_only() {
    let mut b = fresh_run(&quick_config());
    let t0 = 1_000;
    logic::set_paused(b.s(), t0, false).unwrap();
    let (alice, bob) = (Pubkey::new_unique(), Pubkey::new_unique());
    // joining before the grace time: no transition
    logic::join_run(b.s(), t0 + 1, &alice, &[1; 32], &alice).unwrap();
    assert_eq!(b.s().run_state(), RunState::WaitingForMembers);
    // a failed operation does not tick, even when a tick would start the epoch
    let before = bytemuck::bytes_of(b.s()).to_vec();
    assert_eq!(
        logic::join_run(b.s(), t0 + 5, &alice, &[1; 32], &alice),
        Err(PE::AlreadyJoined)
    );
    assert!(bytemuck::bytes_of(b.s()) == &before[..]);
    // a successful one ticks: the epoch starts at once
    logic::join_run(b.s(), t0 + 5, &bob, &[2; 32], &bob).unwrap();
    assert_eq!(b.s().run_state(), RunState::Warmup);
    assert_eq!(b.s().clients().len(), 2);
    // warmup witnesses from both: training starts (by the operation itself)
    logic::warmup_witness(b.s(), t0 + 6, &alice, 0).unwrap();
    logic::warmup_witness(b.s(), t0 + 6, &bob, 1).unwrap();
    assert_eq!(b.s().run_state(), RunState::RoundTrain);
    // withdraw ticks too; a halted run's tick error is ignored
    logic::set_paused(b.s(), t0 + 7, true).unwrap(); // active: pause after the round
    assert_eq!(b.s().header.pending_pause, 1);
    assert_eq!(logic::tick(b.s(), t0 + 7), Ok(()));
}

#[test]
fn synced_and_resync_are_the_core_operations() {
    let cfg = RunConfig {
        max_syncing: 1,
        ..quick_config()
    };
    let mut b = fresh_run(&cfg);
    let t0 = 1_000;
    logic::set_paused(b.s(), t0, false).unwrap();
    let (alice, carol) = (Pubkey::new_unique(), Pubkey::new_unique());
    logic::join_run(b.s(), t0 + 5, &alice, &[1; 32], &alice).unwrap();
    logic::warmup_witness(b.s(), t0 + 6, &alice, 0).unwrap();
    assert_eq!(b.s().run_state(), RunState::RoundTrain);
    // a join mid-epoch: queued, then syncing at once (a free slot)
    logic::join_run(b.s(), t0 + 6, &carol, &[3; 32], &carol).unwrap();
    assert_eq!(b.s().clients()[1].phase(), ClientPhase::Syncing);
    // nothing is agreed yet: refused, and nothing written (no tick either)
    let before = bytemuck::bytes_of(b.s()).to_vec();
    assert_eq!(
        logic::synced(b.s(), t0 + 60, &carol, 1, 1, &[9; 32]),
        Err(PE::SyncHashMismatch)
    );
    assert_eq!(
        logic::resync(b.s(), t0 + 60, &carol, 1),
        Err(PE::WrongPhase)
    );
    assert!(bytemuck::bytes_of(b.s()) == &before[..]);
    // an Active client lags: back to Syncing at the current step; then the tick runs
    logic::resync(b.s(), t0 + 60, &alice, 0).unwrap();
    assert_eq!(b.s().clients()[0].phase(), ClientPhase::Syncing);
    let step = b.s().header.step;
    assert_eq!(b.s().clients()[0].since, step);
    assert_eq!(b.s().run_state(), RunState::RoundWitness);
    assert_eq!(
        logic::synced(b.s(), t0 + 60, &alice, 0, 1, &[0; 32]),
        Err(PE::SyncHashMismatch)
    );
}

#[test]
fn halted_runs_only_tick_with_an_error() {
    let mut b = fresh_run(&quick_config());
    assert_eq!(logic::tick(b.s(), 5), Err(PE::Halted));
    // a join on an Uninitialized run is accepted; the tick's Halted is ignored
    let stranger = Pubkey::new_unique();
    assert_eq!(
        logic::join_run(b.s(), 5, &stranger, &[0; 32], &stranger),
        Ok(())
    );
    assert_eq!(b.s().pending().len(), 1);
}

#[test]
fn update_and_set_paused_are_the_core_operations() {
    let mut b = fresh_run(&quick_config());
    let cfg = RunConfigParams::from_core(&RunConfig {
        epoch_time: 900,
        ..quick_config()
    });
    logic::update(b.s(), 1, Some(&cfg), None, None).unwrap();
    assert_eq!(b.s().config.epoch_time, 900);
    assert_eq!(logic::set_paused(b.s(), 1, true), Err(PE::Halted));
    assert_eq!(logic::set_paused(b.s(), 1, false), Ok(()));
    assert_eq!(
        logic::update(b.s(), 2, Some(&cfg), None, None),
        Err(PE::UpdateNotHalted)
    );
    assert_eq!(logic::set_paused(b.s(), 2, false), Err(PE::CannotResume));
}

#[test]
fn free_needs_a_halted_run() {
    let mut b = fresh_run(&quick_config());
    for (state, ok) in [
        (RunState::Uninitialized, true),
        (RunState::WaitingForMembers, false),
        (RunState::Warmup, false),
        (RunState::RoundTrain, false),
        (RunState::RoundWitness, false),
        (RunState::Cooldown, false),
        (RunState::Finished, true),
        (RunState::Paused, true),
    ] {
        b.s().header.run_state = state as u8;
        assert_eq!(logic::check_free(b.s()).is_ok(), ok, "{state:?}");
        if !ok {
            assert_eq!(logic::check_free(b.s()), Err(PE::CloseNotHalted));
        }
    }
}

#[test]
fn join_permission_rules() {
    let (key, signer, other) = (
        Pubkey::new_unique(),
        Pubkey::new_unique(),
        Pubkey::new_unique(),
    );
    let mut instance = CoordinatorInstance {
        bump: 1,
        main_authority: other,
        join_authority: other,
        permissionless: false,
        coordinator_account: other,
        run_id: "r".into(),
    };
    let auth = |instance, grantee| JoinAuthorization {
        bump: 1,
        coordinator_instance: instance,
        grantee,
    };
    let check = |i: &CoordinatorInstance, a: Option<&JoinAuthorization>| {
        logic::check_join_permission(i, &key, &signer, a)
    };
    assert_eq!(check(&instance, None), Err(PE::NotAuthorized));
    assert_eq!(check(&instance, Some(&auth(key, signer))), Ok(()));
    assert_eq!(
        check(&instance, Some(&auth(key, other))),
        Err(PE::SignerMismatch)
    );
    assert_eq!(
        check(&instance, Some(&auth(other, signer))),
        Err(PE::AuthorizationMismatch)
    );
    instance.permissionless = true;
    assert_eq!(check(&instance, None), Ok(()));
    assert_eq!(check(&instance, Some(&auth(other, other))), Ok(()));
}

// ---------------------------------------------------------------- points

fn contributor(identity: Pubkey, delegates: Vec<Pubkey>) -> Contributor {
    Contributor {
        bump: 1,
        coordinator_instance: Pubkey::new_unique(),
        identity,
        delegates,
        presence_rounds: 0,
        sequences: 0,
        tokens: 0,
        token_carry: 0,
        presence_points: 0,
        compute_points: 0,
    }
}

#[test]
fn delegates_rules() {
    let (id, node, stranger) = (
        Pubkey::new_unique(),
        Pubkey::new_unique(),
        Pubkey::new_unique(),
    );
    let c = contributor(id, vec![node]);
    assert_eq!(logic::check_delegate(&c, &id, &id), Ok(()));
    assert_eq!(logic::check_delegate(&c, &node, &id), Ok(()));
    assert_eq!(
        logic::check_delegate(&c, &stranger, &id),
        Err(PE::NotADelegate)
    );
    assert_eq!(logic::check_delegates(&[node; 8]), Ok(()));
    assert_eq!(
        logic::check_delegates(&[node; 9]),
        Err(PE::TooManyDelegates)
    );
}

#[test]
fn settle_points_moves_a_slot_into_its_contributor_and_ticks() {
    let mut b = fresh_run(&quick_config());
    let t0 = 1_000;
    logic::set_paused(b.s(), t0, false).unwrap();
    let (alice, id) = (Pubkey::new_unique(), Pubkey::new_unique());
    logic::join_run(b.s(), t0 + 5, &alice, &[1; 32], &id).unwrap();
    assert_eq!(b.s().run_state(), RunState::Warmup);
    assert_eq!(b.s().clients()[0].identity, id.to_bytes());
    // nothing earned yet
    assert_eq!(
        logic::settle_points(b.s(), t0 + 5, 0, &id),
        Err(PE::NothingToSettle)
    );
    assert_eq!(
        logic::settle_points(b.s(), t0 + 5, 1, &id),
        Err(PE::InvalidClientIndex)
    );
    // a round present (the core credits it at the round's end), then pause: Cooldown, Paused
    b.s().clients[0].presence = 3;
    assert_eq!(
        logic::settle_points(b.s(), t0 + 5, 0, &alice),
        Err(PE::WrongContributor)
    );
    let (moved, config) = logic::settle_points(b.s(), t0 + 5, 0, &id).unwrap();
    assert_eq!((moved.presence, moved.sequences), (3, 0));
    assert!(!b.s().clients()[0].unsettled());
    let mut entry = contributor(id, vec![alice]);
    logic::credit_contributor(&mut entry, &moved, &config).unwrap();
    assert_eq!((entry.presence_rounds, entry.presence_points), (3, 3));
    // another identity's credit is refused by the core
    let mut other = contributor(alice, vec![]);
    assert_eq!(
        logic::credit_contributor(&mut other, &moved, &config),
        Err(PE::InvalidOperation)
    );
}

#[test]
fn the_last_settle_starts_the_epoch() {
    let mut b = fresh_run(&quick_config());
    let t0 = 1_000;
    logic::set_paused(b.s(), t0, false).unwrap();
    let alice = Pubkey::new_unique();
    logic::join_run(b.s(), t0 + 5, &alice, &[1; 32], &alice).unwrap();
    assert_eq!(b.s().run_state(), RunState::Warmup);
    // back to WaitingForMembers with a slot holding points and a joiner waiting
    logic::withdraw(b.s(), t0 + 6, &alice).unwrap();
    assert_eq!(b.s().run_state(), RunState::WaitingForMembers);
    b.s().clients[0].presence = 1;
    logic::join_run(b.s(), t0 + 20, &alice, &[1; 32], &alice).unwrap();
    assert_eq!(b.s().run_state(), RunState::WaitingForMembers);
    assert_eq!(core_sm::tick_deadline(b.s()), None);
    logic::settle_points(b.s(), t0 + 20, 0, &alice).unwrap();
    assert_eq!(b.s().run_state(), RunState::Warmup);
}
