//! Each instruction's effect through the runtime: the state `init_coordinator` writes (the
//! core's `new_run`, byte for byte) and the instance beside it, the authority rules, the tick
//! after a client operation, join authorizations, `free_coordinator`, and the sizes a real
//! cluster imposes.

use anchor_lang::{AccountDeserialize, Discriminator, InstructionData};
use psyche_coordinator::{
    instruction as ixs, CheckpointKindParam, CheckpointParams, CoordinatorAccount,
    CoordinatorInstance, CoordinatorProgramError as PE, JoinAuthorization, RunConfigParams,
};
use psyche_coordinator_core::{self as core_sm, CheckpointArgs, RunState};
use psyche_localnet::ix::{Run, PROGRAM_ID};
use solana_pubkey::Pubkey;
use solana_rent::Rent;
use solana_signer::Signer;

use crate::support::*;

fn lamports(env: &Env, key: &Pubkey) -> u64 {
    env.account(key).map_or(0, |a| a.lamports)
}

// ------------------------------------------------------------------------------ init

#[test]
fn init_writes_the_core_new_run_and_the_instance() {
    let config = small_config();
    let mut env = Env::new();
    let r = env.create_run("run-1", true, config);
    let data = env.data(&r.account_key());
    assert_eq!(data.len(), 8 + 187_328);
    assert_eq!(&data[..8], CoordinatorAccount::DISCRIMINATOR);
    let mut expected = StateBuf::zeroed();
    core_sm::new_run(
        expected.get_mut(),
        b"run-1",
        &config,
        42,
        &CheckpointArgs::DUMMY,
    )
    .unwrap();
    assert!(
        data[8..] == *expected.bytes(),
        "state differs from the core's new_run"
    );
    assert_eq!(env.run_state(&r), RunState::Uninitialized);

    let (pda, bump) = Pubkey::find_program_address(&[b"coordinator", b"run-1"], &PROGRAM_ID);
    assert_eq!(pda, r.instance());
    let instance = env.account(&r.instance()).unwrap();
    assert_eq!(
        CoordinatorInstance::try_deserialize(&mut &instance.data[..]).unwrap(),
        CoordinatorInstance {
            bump,
            main_authority: r.authority.pubkey(),
            join_authority: r.join_authority.pubkey(),
            permissionless: true,
            coordinator_account: r.account_key(),
            run_id: "run-1".into(),
        }
    );
    assert_eq!(instance.owner, PROGRAM_ID);
    assert_eq!(instance.data.len(), CoordinatorInstance::SPACE);
    assert_eq!(
        instance.lamports,
        Rent::default().minimum_balance(CoordinatorInstance::SPACE)
    );
}

// ------------------------------------------------------------------------------ authority

#[test]
fn owner_instructions_need_the_main_authority_and_the_run_account() {
    let mut env = Env::new();
    let r = env.create_run("auth", true, small_config());
    let watch = r.keys();
    let stranger = env.keypair();
    let ix = r.run.set_paused(&stranger.pubkey(), false);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAuthority), &watch);
    let config = Some(RunConfigParams::from_core(&small_config()));
    let ix = r.run.update(&stranger.pubkey(), config, None);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAuthority), &watch);
    // another run's coordinator account
    let other = env.create_run("auth-2", true, small_config());
    let swapped = Run {
        instance: r.instance(),
        account: other.account_key(),
    };
    let auth = r.authority.insecure_clone();
    let mut both = watch.to_vec();
    both.extend(other.keys());
    let ix = swapped.set_paused(&auth.pubkey(), false);
    env.expect_err(&[&auth], &[ix], pe(PE::WrongCoordinatorAccount), &both);
    let ix = swapped.tick(&stranger.pubkey());
    env.expect_err(&[&stranger], &[ix], pe(PE::WrongCoordinatorAccount), &both);

    // the authority: halted run updates, resume, then the core's errors
    let payer = env.payer.pubkey();
    env.expect_err(&[], &[r.run.tick(&payer)], pe(PE::Halted), &watch);
    let checkpoint = CheckpointParams {
        kind: CheckpointKindParam::Stored,
        repo: "store/manifest".into(),
        revision: "main".into(),
        hash: [3; 32],
        step: 5,
    };
    env.ok(
        &[&auth],
        &[r.run.update(&auth.pubkey(), None, Some(checkpoint))],
    );
    let s = env.state(&r.account_key());
    assert_eq!(s.get().repo(), b"store/manifest");
    assert_eq!(s.get().checkpoint_kind(), core_sm::CheckpointKind::Stored);
    assert_eq!(
        (s.get().checkpoint_hash, s.get().checkpoint_step),
        ([3; 32], 5)
    );
    env.resume(&r);
    assert_eq!(env.run_state(&r), RunState::WaitingForMembers);
    let ix = r.run.set_paused(&auth.pubkey(), false);
    env.expect_err(&[&auth], &[ix], pe(PE::CannotResume), &watch);
    let ix = r.run.update(&auth.pubkey(), config, None);
    env.expect_err(&[&auth], &[ix], pe(PE::UpdateNotHalted), &watch);
    env.pause(&r);
    assert_eq!(env.run_state(&r), RunState::Paused);
    let ix = r.run.set_paused(&auth.pubkey(), true);
    env.expect_err(&[&auth], &[ix], pe(PE::Halted), &watch);
}

// ------------------------------------------------------------------------------ joining

#[test]
fn a_client_operation_is_followed_by_a_tick() {
    let mut env = Env::new();
    let r = env.create_run("tick-after", true, small_config());
    env.resume(&r);
    env.set_time(T0 + 10); // past waiting_for_members_extra_time
    let client = env.keypair();
    env.ok(
        &[&client],
        &[r.run.join_run(&client.pubkey(), None, [7; 32])],
    );
    // the join alone leaves WaitingForMembers; the tick that follows starts the epoch
    let s = env.state(&r.account_key());
    assert_eq!(s.get().run_state(), RunState::Warmup);
    assert_eq!(s.get().clients().len(), 1);
    assert_eq!(s.get().clients()[0].signer, client.pubkey().to_bytes());
    assert_eq!(s.get().clients()[0].p2p_identity, [7; 32]);
    // a halted run: the operation stands, the tick's Halted is ignored
    env.pause(&r);
    let late = env.keypair();
    env.ok(&[&late], &[r.run.join_run(&late.pubkey(), None, [7; 32])]);
    let s = env.state(&r.account_key());
    assert_eq!(s.get().pending().len(), 1);
    assert_eq!(s.get().run_state(), RunState::Paused);
}

#[test]
fn permissioned_runs_need_a_join_authorization() {
    let mut env = Env::new();
    let r = env.create_run("closed", false, small_config());
    env.resume(&r);
    let watch = r.keys();
    let (alice, bob, stranger) = (env.keypair(), env.keypair(), env.keypair());
    let ix = r.run.join_run(&alice.pubkey(), None, [7; 32]);
    env.expect_err(&[&alice], &[ix], pe(PE::NotAuthorized), &watch);
    let payer = env.payer.pubkey();
    let ix = r
        .run
        .authorize_joiner(&payer, &stranger.pubkey(), alice.pubkey());
    env.expect_err(&[&stranger], &[ix], pe(PE::NotJoinAuthority), &watch);
    let alice_auth = env.authorize(&r, &alice.pubkey());
    let data = env.data(&alice_auth);
    let auth = JoinAuthorization::try_deserialize(&mut &data[..]).unwrap();
    assert_eq!(
        (auth.coordinator_instance, auth.grantee),
        (r.instance(), alice.pubkey())
    );
    assert_eq!(data.len(), JoinAuthorization::SPACE);
    // twice: the PDA exists (the system program refuses it: AccountAlreadyInUse)
    let ja = r.join_authority.insecure_clone();
    let again = r.run.authorize_joiner(&payer, &ja.pubkey(), alice.pubkey());
    env.expect_err(&[&ja], &[again], custom_at(0, 0), &[alice_auth]);

    let ix = r.run.join_run(&bob.pubkey(), Some(alice_auth), [7; 32]);
    env.expect_err(&[&bob], &[ix], pe(PE::SignerMismatch), &watch);
    env.ok(
        &[&alice],
        &[r.run.join_run(&alice.pubkey(), Some(alice_auth), [7; 32])],
    );
    assert_eq!(env.state(&r.account_key()).get().pending().len(), 1);

    // another run's authorization
    let other = env.create_run("closed-2", false, small_config());
    let bob_other = env.authorize(&other, &bob.pubkey());
    let ix = r.run.join_run(&bob.pubkey(), Some(bob_other), [7; 32]);
    env.expect_err(&[&bob], &[ix], pe(PE::AuthorizationMismatch), &watch);

    // revoke: only the join authority; the rent goes to the spill account
    let spill = Pubkey::new_unique();
    let ix = r
        .run
        .revoke_joiner(&stranger.pubkey(), &spill, &alice.pubkey());
    env.expect_err(&[&stranger], &[ix], pe(PE::NotJoinAuthority), &[alice_auth]);
    let rent = lamports(&env, &alice_auth);
    env.ok(
        &[&ja],
        &[r.run.revoke_joiner(&ja.pubkey(), &spill, &alice.pubkey())],
    );
    assert!(env.account(&alice_auth).is_none());
    assert_eq!(lamports(&env, &spill), rent);
    // alice leaves and cannot come back
    env.ok(&[&alice], &[r.run.withdraw(&alice.pubkey())]);
    let ix = r.run.join_run(&alice.pubkey(), None, [7; 32]);
    env.expect_err(&[&alice], &[ix], pe(PE::NotAuthorized), &watch);
    // an authorization of another run cannot be revoked through this one
    let mut wrong = r.run.revoke_joiner(&ja.pubkey(), &spill, &bob.pubkey());
    wrong.accounts[3].pubkey = bob_other;
    env.expect_err(
        &[&ja],
        &[wrong],
        pe(PE::AuthorizationMismatch),
        &[bob_other],
    );
}

#[test]
fn permissionless_runs_ignore_authorizations() {
    let mut env = Env::new();
    let r = env.create_run("open", true, small_config());
    env.resume(&r);
    let client = env.keypair();
    env.ok(
        &[&client],
        &[r.run.join_run(&client.pubkey(), None, [7; 32])],
    );
}

// ------------------------------------------------------------------------------ free

#[test]
fn free_coordinator_closes_a_halted_run() {
    let mut env = Env::new();
    let r = env.create_run("free", true, small_config());
    env.resume(&r);
    let spill = Pubkey::new_unique();
    let auth = r.authority.insecure_clone();
    let ix = r.run.free_coordinator(&auth.pubkey(), &spill);
    env.expect_err(&[&auth], &[ix], pe(PE::CloseNotHalted), &r.keys());
    env.pause(&r);
    let stranger = env.keypair();
    let ix = r.run.free_coordinator(&stranger.pubkey(), &spill);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAuthority), &r.keys());
    let total = lamports(&env, &r.instance()) + lamports(&env, &r.account_key());
    env.ok(&[&auth], &[r.run.free_coordinator(&auth.pubkey(), &spill)]);
    assert!(env.account(&r.instance()).is_none());
    assert!(env.account(&r.account_key()).is_none());
    assert_eq!(lamports(&env, &spill), total);
    // the run id can be used again
    env.create_run("free", true, small_config());
}

// ------------------------------------------------------------------------------ sizes

#[test]
fn witness_instruction_size() {
    // 8 discriminator + index + step + 2 x (4 + 356) blooms + 32 merkle root + 32 parameter
    // hash. A legacy transaction with one signature and the program plus three account keys
    // adds 237 bytes: it must fit in the 1,232-byte packet limit of a real cluster.
    let data = ixs::Witness {
        index: 0,
        step: 1,
        participant_bloom: vec![0; 356],
        broadcast_bloom: vec![0; 356],
        broadcast_merkle: [0; 32],
        param_hash: [0; 32],
    }
    .data();
    assert_eq!(data.len(), 800);
    const LEGACY_TX_OVERHEAD: usize = 1 + 64 + 3 + 1 + 4 * 32 + 32 + 1 + 1 + 1 + 3 + 2;
    assert_eq!(LEGACY_TX_OVERHEAD, 237);
    assert!(LEGACY_TX_OVERHEAD + data.len() <= 1232);
    // as clients send it: the compute-unit limit first (one more program key and a 5-byte
    // instruction), signed by the client paying for it; serialized as the wire carries it
    let user = solana_keypair::Keypair::new();
    let run = Run::new(&"r".repeat(32), Pubkey::new_unique());
    let witness = run.witness(
        &user.pubkey(),
        255,
        u32::MAX,
        vec![0xff; 356],
        vec![0xff; 356],
        [0xff; 32],
        [0xff; 32],
    );
    let mut limit = vec![2u8]; // ComputeBudgetInstruction::SetComputeUnitLimit
    limit.extend_from_slice(&1_400_000u32.to_le_bytes());
    let budget = solana_instruction::Instruction {
        program_id: solana_sdk_ids::compute_budget::ID,
        accounts: vec![],
        data: limit,
    };
    let hash = solana_hash::Hash::new_unique();
    let msg = solana_message::Message::new_with_blockhash(
        &[budget, witness],
        Some(&user.pubkey()),
        &hash,
    );
    let tx = solana_transaction::Transaction::new(&[&user], msg, hash);
    let wire = bincode::serialize(&tx).unwrap();
    assert_eq!(wire.len(), 1077);
    assert!(wire.len() <= 1232);
}

#[test]
fn a_truncated_coordinator_account_fails_by_name() {
    // Cannot happen through the program (init checks the size); the handlers still check
    // before Anchor's loader would slice out of bounds.
    let mut env = Env::new();
    let r = env.create_run("short", true, small_config());
    let mut account = env.account(&r.account_key()).unwrap();
    account.data.truncate(CoordinatorAccount::SPACE - 8);
    env.chain.svm.set_account(r.account_key(), account).unwrap();
    let payer = env.payer.pubkey();
    let ix = r.run.tick(&payer);
    env.expect_err(&[], &[ix], pe(PE::AccountIncorrectSize), &r.keys());
    let auth = r.authority.insecure_clone();
    let ix = r.run.set_paused(&auth.pubkey(), false);
    env.expect_err(&[&auth], &[ix], pe(PE::AccountIncorrectSize), &r.keys());
}
