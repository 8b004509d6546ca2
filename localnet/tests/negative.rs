//! Negative tests through the runtime: for every instruction, signed transactions that must
//! fail with the exact named error (the program's `CoordinatorProgramError`, 6000-6020 = the
//! core's `CoordinatorError`, 6100-6110 the program's own, or Anchor's account errors) and leave
//! the coordinator account, the instance and any other account involved byte for byte as they
//! were. A failed transaction still lands and charges its fee to the payer, so the payer is
//! never compared.

mod support;

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::{
    CheckpointKindParam, CheckpointParams, CoordinatorAccount, CoordinatorProgramError as PE,
    RunConfigParams,
};
use psyche_coordinator_core::{committee, RunConfig, RunState, BLOOM_BYTES};
use psyche_localnet::ix::{authorization_key, instance_key, Run, PROGRAM_ID};
use solana_instruction::{AccountMeta, Instruction};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use support::*;

/// The same instruction with account `i`'s signer flag cleared (nobody signs for it).
fn unsigned(mut ix: Instruction, i: usize) -> Instruction {
    ix.accounts[i].is_signer = false;
    ix
}

/// Allocates a program-owned account of `space` bytes (all zero) in its own transaction.
fn preallocate(env: &mut Env, space: usize, owner: &Pubkey) -> Keypair {
    let k = Keypair::new();
    env.preallocate(&k, space, owner);
    k
}

fn init_ix(env: &Env, account: &Pubkey, id: &str, config: &RunConfig) -> Instruction {
    Run::new(id, *account).init(
        &env.payer.pubkey(),
        id,
        env.payer.pubkey(),
        env.payer.pubkey(),
        true,
        RunConfigParams::from_core(config),
        1,
    )
}

fn hub(repo: &str, revision: &str) -> CheckpointParams {
    CheckpointParams {
        kind: CheckpointKindParam::Hub,
        repo: repo.into(),
        revision: revision.into(),
    }
}

// ------------------------------------------------------------------------------ init

#[test]
fn init_coordinator_refusals() {
    let mut env = Env::new();
    let config = test_config(1);
    let base = env.create_run("base", true, config);
    let space = CoordinatorAccount::SPACE;
    let program = PROGRAM_ID;

    // wrong sizes: the account was allocated by the creator, init refuses it by name
    for len in [space - 8, space + 8, 0, 8] {
        let a = preallocate(&mut env, len, &program);
        let ix = init_ix(&env, &a.pubkey(), "sized", &config);
        env.expect_err(
            &[],
            &[ix],
            pe(PE::AccountIncorrectSize),
            &[a.pubkey(), instance_key("sized")],
        );
    }
    assert!(env.account(&instance_key("sized")).is_none());

    // already initialized: another run's coordinator account
    let ix = init_ix(&env, &base.account_key(), "reuse", &config);
    env.expect_err(
        &[],
        &[ix],
        pe(PE::AccountAlreadyInitialized),
        &[base.account_key(), base.instance(), instance_key("reuse")],
    );

    // run ids: too long, empty (length checks), a NUL (the core's check)
    let blank = preallocate(&mut env, space, &program);
    let watch_blank = |id: &str| [blank.pubkey(), instance_key(id)];
    let long = "x".repeat(33);
    for (id, e) in [
        (long.as_str(), PE::RunIdInvalidLength),
        ("", PE::RunIdInvalidLength),
        ("a\0b", PE::InvalidRunId),
    ] {
        let ix = init_ix(&env, &blank.pubkey(), id, &config);
        env.expect_err(&[], &[ix], pe(e), &watch_blank(id));
    }
    // a run id that is not UTF-8 does not deserialize (Anchor's InstructionDidNotDeserialize)
    let mut ix = init_ix(&env, &blank.pubkey(), "utf8", &config);
    ix.data[8 + 4] = 0xff; // first byte of the borsh string
    env.expect_err(
        &[],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &watch_blank("utf8"),
    );

    // invalid configs (the core's validate)
    for bad in [
        RunConfig {
            epoch_time: 0,
            ..config
        },
        RunConfig {
            witness_nodes: 3,
            ..config
        },
        RunConfig {
            init_min_clients: 0,
            ..config
        },
        RunConfig {
            global_batch_size_end: 1,
            global_batch_size_start: 2,
            ..config
        },
    ] {
        let ix = init_ix(&env, &blank.pubkey(), "bad-config", &bad);
        env.expect_err(
            &[],
            &[ix],
            pe(PE::InvalidConfig),
            &watch_blank("bad-config"),
        );
    }
    assert!(env.data(&blank.pubkey()).iter().all(|&b| b == 0));

    // in the creator's own transaction (create_account + init): the error names instruction 1
    // and the coordinator account is not created either
    let fresh = Keypair::new();
    let bad = RunConfig {
        epoch_time: 0,
        ..config
    };
    let ixs = create_run_ixs(
        &env,
        &fresh.pubkey(),
        "atomic",
        env.payer.pubkey(),
        env.payer.pubkey(),
        true,
        &bad,
    );
    env.expect_err(
        &[&fresh],
        &ixs,
        custom_at(1, PE::InvalidConfig.code()),
        &[fresh.pubkey(), instance_key("atomic")],
    );
    assert!(env.account(&fresh.pubkey()).is_none());

    // a duplicate run id: the instance PDA exists; Anchor's `init` allocates it through the
    // system program, which refuses an account in use (SystemError::AccountAlreadyInUse = 0)
    let ix = init_ix(&env, &blank.pubkey(), "base", &config);
    env.expect_err(
        &[],
        &[ix],
        custom_at(0, 0),
        &[blank.pubkey(), base.instance(), base.account_key()],
    );

    // a coordinator account not owned by the program (Anchor's owner constraint)
    let foreign = preallocate(&mut env, space, &solana_sdk_ids::system_program::ID);
    let ix = init_ix(&env, &foreign.pubkey(), "foreign", &config);
    env.expect_err(
        &[],
        &[ix],
        anchor(AE::ConstraintOwner),
        &[foreign.pubkey(), instance_key("foreign")],
    );

    // an instance address that is not the run id's PDA
    let mut ix = init_ix(&env, &blank.pubkey(), "seeds", &config);
    ix.accounts[1].pubkey = instance_key("other");
    env.expect_err(
        &[],
        &[ix],
        anchor(AE::ConstraintSeeds),
        &[blank.pubkey(), instance_key("other"), instance_key("seeds")],
    );

    // a payer that does not sign
    let stranger = env.keypair();
    let mut ix = init_ix(&env, &blank.pubkey(), "unsigned", &config);
    ix.accounts[0] = AccountMeta::new(stranger.pubkey(), false);
    env.expect_err(
        &[],
        &[ix],
        anchor(AE::AccountNotSigner),
        &[blank.pubkey(), instance_key("unsigned"), stranger.pubkey()],
    );

    // another program in place of the system program
    let mut ix = init_ix(&env, &blank.pubkey(), "sysprog", &config);
    ix.accounts[3].pubkey = PROGRAM_ID;
    env.expect_err(
        &[],
        &[ix],
        anchor(AE::InvalidProgramId),
        &[blank.pubkey(), instance_key("sysprog")],
    );

    // and the blank account still takes a run
    let ix = init_ix(&env, &blank.pubkey(), "finally", &config);
    env.ok(&[], &[ix]);
}

// ------------------------------------------------------------------------------ owner

#[test]
fn update_refusals() {
    let mut env = Env::new();
    let config = test_config(2);
    let r = env.create_run("upd", true, config);
    let watch = r.keys();
    let stranger = env.keypair();
    let cfg = Some(RunConfigParams::from_core(&config));

    // not the main authority: a stranger, the join authority
    for signer in [&stranger, &r.join_authority] {
        let ix = r.run.update(&signer.pubkey(), cfg, None);
        env.expect_err(&[signer], &[ix], pe(PE::NotAuthority), &watch);
    }
    // the authority, halted run: the core's argument checks
    let auth = r.authority.insecure_clone();
    let bad = RunConfigParams::from_core(&RunConfig {
        cooldown_time: 0,
        ..config
    });
    let ix = r.run.update(&auth.pubkey(), Some(bad), None);
    env.expect_err(&[&auth], &[ix], pe(PE::InvalidConfig), &watch);
    let long = "r".repeat(65);
    for ck in [
        hub("", "main"),
        hub(&long, ""),
        hub("org/model", &long),
        hub("org\0model", ""),
    ] {
        let ix = r.run.update(&auth.pubkey(), None, Some(ck));
        env.expect_err(&[&auth], &[ix], pe(PE::InvalidCheckpoint), &watch);
    }
    // a valid config with an invalid checkpoint writes neither
    let ix = r.run.update(&auth.pubkey(), cfg, Some(hub("", "")));
    env.expect_err(&[&auth], &[ix], pe(PE::InvalidCheckpoint), &watch);
    // an unknown checkpoint kind does not deserialize
    let mut ix = r
        .run
        .update(&auth.pubkey(), None, Some(hub("org/model", "")));
    // ... kind (1), repo (4 + 9 bytes), revision (4 + 0 bytes)
    let kind_at = ix.data.len() - (4 + 9) - 4 - 1;
    assert_eq!(ix.data[kind_at], CheckpointKindParam::Hub as u8);
    ix.data[kind_at] = 3;
    env.expect_err(
        &[&auth],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &watch,
    );

    // a running run
    env.resume(&r);
    let ix = r.run.update(&auth.pubkey(), cfg, None);
    env.expect_err(&[&auth], &[ix], pe(PE::UpdateNotHalted), &watch);
    // the authority not signing
    let ix = unsigned(r.run.update(&auth.pubkey(), cfg, None), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);

    // a finished run
    let live = finished_run(&mut env, "upd-done");
    let a = live.r.authority.insecure_clone();
    let ix = live.r.run.update(&a.pubkey(), cfg, None);
    env.expect_err(&[&a], &[ix], pe(PE::RunFinished), &live.r.keys());
}

/// A run that trained its steps: Finished.
fn finished_run(env: &mut Env, id: &str) -> Live {
    let config = RunConfig {
        total_steps: 1,
        ..test_config(3)
    };
    let live = env.round_train(id, 3, config);
    assert_eq!(env.finish_epoch(&live), RunState::Finished);
    live
}

#[test]
fn set_paused_refusals() {
    let mut env = Env::new();
    let r = env.create_run("pause", true, test_config(2));
    let watch = r.keys();
    let stranger = env.keypair();
    let auth = r.authority.insecure_clone();
    for signer in [&stranger, &r.join_authority] {
        for paused in [false, true] {
            let ix = r.run.set_paused(&signer.pubkey(), paused);
            env.expect_err(&[signer], &[ix], pe(PE::NotAuthority), &watch);
        }
    }
    // Uninitialized: pausing is refused (halted)
    let ix = r.run.set_paused(&auth.pubkey(), true);
    env.expect_err(&[&auth], &[ix], pe(PE::Halted), &watch);
    let ix = unsigned(r.run.set_paused(&auth.pubkey(), false), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // a bool that is neither 0 nor 1 does not deserialize
    let mut ix = r.run.set_paused(&auth.pubkey(), false);
    ix.data[8] = 2;
    env.expect_err(
        &[&auth],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &watch,
    );
    env.resume(&r);
    let ix = r.run.set_paused(&auth.pubkey(), false);
    env.expect_err(&[&auth], &[ix], pe(PE::CannotResume), &watch);
    env.pause(&r);
    let ix = r.run.set_paused(&auth.pubkey(), true);
    env.expect_err(&[&auth], &[ix], pe(PE::Halted), &watch);
    // a finished run can be neither resumed nor paused
    let live = finished_run(&mut env, "pause-done");
    let a = live.r.authority.insecure_clone();
    let ix = live.r.run.set_paused(&a.pubkey(), false);
    env.expect_err(&[&a], &[ix], pe(PE::CannotResume), &live.r.keys());
    let ix = live.r.run.set_paused(&a.pubkey(), true);
    env.expect_err(&[&a], &[ix], pe(PE::Halted), &live.r.keys());
}

// ------------------------------------------------------------------------------ accounts

/// Every instruction that touches the state, with run A's instance and the coordinator
/// account of run B (and the other way round): `WrongCoordinatorAccount`. Then accounts of
/// the wrong type, owner or mutability: Anchor's account errors.
#[test]
fn accounts_of_another_run_are_refused() {
    let mut env = Env::new();
    let a = env.round_train("run-a", 2, test_config(2));
    let b = env.round_train("run-b", 2, test_config(2));
    let watch = [
        a.r.instance(),
        a.r.account_key(),
        b.r.instance(),
        b.r.account_key(),
    ];
    let spill = Pubkey::new_unique();

    // instructions of run `x` (signed by x's authority or client 0), with `account` swapped in
    let build = |x: &Live, instance: Pubkey, account: Pubkey| -> Vec<(Instruction, Keypair)> {
        let run = Run { instance, account };
        let auth = x.r.authority.insecure_clone();
        let c = x.client(0).insecure_clone();
        let ck = c.pubkey();
        let au = auth.pubkey();
        vec![
            (run.update(&au, None, None), auth.insecure_clone()),
            (run.set_paused(&au, true), auth.insecure_clone()),
            (run.free_coordinator(&au, &spill), auth.insecure_clone()),
            (run.join_run(&ck, None, [1; 32]), c.insecure_clone()),
            (run.tick(&ck), c.insecure_clone()),
            (
                run.witness(
                    &ck,
                    0,
                    1,
                    vec![0; BLOOM_BYTES],
                    vec![0; BLOOM_BYTES],
                    [0; 32],
                ),
                c.insecure_clone(),
            ),
            (run.warmup_witness(&ck, 0), c.insecure_clone()),
            (run.health_check(&ck, 0, vec![1]), c.insecure_clone()),
            (
                run.checkpoint(&ck, 0, "org/model", "main"),
                c.insecure_clone(),
            ),
            (run.withdraw(&ck), c.insecure_clone()),
        ]
    };
    let mut cases = build(&a, a.r.instance(), b.r.account_key());
    cases.extend(build(&b, b.r.instance(), a.r.account_key()));
    assert_eq!(cases.len(), 20);
    for (ix, signer) in &cases {
        env.expect_err(
            &[signer],
            std::slice::from_ref(ix),
            pe(PE::WrongCoordinatorAccount),
            &watch,
        );
    }

    // an instance in place of the coordinator account, and the other way round: Anchor's
    // discriminator check
    let c0 = a.client(0).insecure_clone();
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[2].pubkey = a.r.instance();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::AccountDiscriminatorMismatch),
        &watch,
    );
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[1].pubkey = a.r.account_key();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::AccountDiscriminatorMismatch),
        &watch,
    );
    // an instance owned by another program (a wallet), one that does not exist
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[1].pubkey = env.payer.pubkey();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::AccountOwnedByWrongProgram),
        &watch,
    );
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[1].pubkey = Pubkey::new_unique();
    env.expect_err(&[&c0], &[ix], anchor(AE::AccountNotInitialized), &watch);
    // a coordinator account passed read-only
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[2].is_writable = false;
    env.expect_err(&[&c0], &[ix], anchor(AE::ConstraintMut), &watch);
    // too few accounts, no instruction data, an unknown discriminator
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts.truncate(2);
    env.expect_err(&[&c0], &[ix], anchor(AE::AccountNotEnoughKeys), &watch);
    // (Anchor 0.31 matches discriminators by prefix: empty data is no known instruction)
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.data.clear();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::InstructionFallbackNotFound),
        &watch,
    );
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.data = vec![1, 2, 3, 4, 5, 6, 7, 8];
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::InstructionFallbackNotFound),
        &watch,
    );
    // the state still works
    env.tick(&a.r);
}

#[test]
fn negative_clock_is_an_invalid_operation() {
    let mut env = Env::new();
    let r = env.create_run("clock", true, test_config(2));
    env.set_time(-1);
    let auth = r.authority.insecure_clone();
    let ix = r.run.set_paused(&auth.pubkey(), false);
    env.expect_err(&[&auth], &[ix], pe(PE::InvalidOperation), &r.keys());
    let payer = env.payer.pubkey();
    env.expect_err(
        &[],
        &[r.run.tick(&payer)],
        pe(PE::InvalidOperation),
        &r.keys(),
    );
}

// ------------------------------------------------------------------------------ join

#[test]
fn join_run_refusals() {
    let mut env = Env::new();
    let open = env.create_run("open", true, test_config(2));
    env.resume(&open);
    let alice = env.keypair();
    let bob = env.keypair();
    env.join(&open, &alice, None);
    let ix = open.run.join_run(&alice.pubkey(), None, [3; 32]);
    env.expect_err(&[&alice], &[ix], pe(PE::AlreadyJoined), &open.keys());
    // the user not signing
    let ix = unsigned(open.run.join_run(&bob.pubkey(), None, [3; 32]), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &open.keys());

    // permissioned runs
    let closed = env.create_run("closed", false, test_config(2));
    let other = env.create_run("closed-2", false, test_config(2));
    env.resume(&closed);
    env.resume(&other);
    let alice_auth = env.authorize(&closed, &alice.pubkey());
    let bob_other = env.authorize(&other, &bob.pubkey());
    let mut watch = closed.keys().to_vec();
    watch.extend([alice_auth, bob_other]);
    // no authorization
    let ix = closed.run.join_run(&bob.pubkey(), None, [3; 32]);
    env.expect_err(&[&bob], &[ix], pe(PE::NotAuthorized), &watch);
    // another grantee's
    let ix = closed
        .run
        .join_run(&bob.pubkey(), Some(alice_auth), [3; 32]);
    env.expect_err(&[&bob], &[ix], pe(PE::SignerMismatch), &watch);
    // another run's
    let ix = closed.run.join_run(&bob.pubkey(), Some(bob_other), [3; 32]);
    env.expect_err(&[&bob], &[ix], pe(PE::AuthorizationMismatch), &watch);
    // not an authorization at all (another instance), and an authorization that is gone
    let ix = closed
        .run
        .join_run(&bob.pubkey(), Some(other.instance()), [3; 32]);
    env.expect_err(
        &[&bob],
        &[ix],
        anchor(AE::AccountDiscriminatorMismatch),
        &watch,
    );
    let gone = authorization_key(&closed.instance(), &bob.pubkey());
    let ix = closed.run.join_run(&bob.pubkey(), Some(gone), [3; 32]);
    env.expect_err(&[&bob], &[ix], anchor(AE::AccountNotInitialized), &watch);
    // the grantee joins, once
    env.join(&closed, &alice, Some(alice_auth));
    let ix = closed
        .run
        .join_run(&alice.pubkey(), Some(alice_auth), [3; 32]);
    env.expect_err(&[&alice], &[ix], pe(PE::AlreadyJoined), &watch);

    // more joiners than batches
    let small = env.create_run(
        "small",
        true,
        RunConfig {
            global_batch_size_start: 2,
            global_batch_size_end: 2,
            ..test_config(2)
        },
    );
    env.resume(&small);
    env.join(&small, &alice, None);
    env.join(&small, &bob, None);
    let carol = env.keypair();
    let ix = small.run.join_run(&carol.pubkey(), None, [3; 32]);
    env.expect_err(
        &[&carol],
        &[ix],
        pe(PE::MoreClientsThanBatches),
        &small.keys(),
    );

    // a finished run
    let live = finished_run(&mut env, "join-done");
    let ix = live.r.run.join_run(&carol.pubkey(), None, [3; 32]);
    env.expect_err(&[&carol], &[ix], pe(PE::RunFinished), &live.r.keys());

    // A paused run still takes joins for its next epoch (the core's `join` refuses only a
    // Finished run; `Halted` is not a join error): documented behaviour, checked here.
    env.pause(&open);
    env.join(&open, &bob, None);
    let s = env.state(&open.account_key());
    assert_eq!(s.get().run_state(), RunState::Paused);
    assert_eq!(s.get().pending().len(), 2);
}

#[test]
fn join_run_refuses_the_257th_joiner() {
    let mut env = Env::new();
    let r = env.create_run(
        "full",
        true,
        RunConfig {
            global_batch_size_start: 512,
            global_batch_size_end: 512,
            ..test_config(2)
        },
    );
    env.resume(&r);
    for _ in 0..psyche_coordinator_core::MAX_CLIENTS {
        let c = Keypair::new();
        env.ok(&[&c], &[r.run.join_run(&c.pubkey(), None, [1; 32])]);
    }
    let c = Keypair::new();
    let ix = r.run.join_run(&c.pubkey(), None, [1; 32]);
    env.expect_err(&[&c], &[ix], pe(PE::ClientsFull), &r.keys());
}

// ------------------------------------------------------------------------------ tick

#[test]
fn tick_refusals() {
    let mut env = Env::new();
    let r = env.create_run("tick", true, test_config(2));
    let payer = env.payer.pubkey();
    // Uninitialized
    env.expect_err(&[], &[r.run.tick(&payer)], pe(PE::Halted), &r.keys());
    env.resume(&r);
    env.tick(&r);
    // Paused
    env.pause(&r);
    env.expect_err(&[], &[r.run.tick(&payer)], pe(PE::Halted), &r.keys());
    // Finished
    let live = finished_run(&mut env, "tick-done");
    env.expect_err(
        &[],
        &[live.r.run.tick(&payer)],
        pe(PE::Halted),
        &live.r.keys(),
    );
    // the user not signing
    env.resume(&r);
    let ix = unsigned(r.run.tick(&Pubkey::new_unique()), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &r.keys());
}

// ------------------------------------------------------------------------------ witness

#[test]
fn witness_refusals() {
    let mut env = Env::new();
    let live = env.round_train("wit", 4, test_config(4));
    let watch = live.r.keys();
    let s = env.state(&live.r.account_key());
    let step = s.get().header.step;
    let witnesses = elected_witnesses(s.get());
    let others = non_witnesses(s.get());
    assert_eq!(witnesses.len(), 2);
    assert_eq!(others.len(), 2);
    let (w, n) = (witnesses[0], others[0]);
    let wk = live.client(w).insecure_clone();

    // a client that is not elected
    let nk = live.client(n).insecure_clone();
    env.expect_err(
        &[&nk],
        &[live.witness_ix(n, step)],
        pe(PE::NotAWitness),
        &watch,
    );
    // wrong steps
    for bad_step in [step + 1, step - 1, 0, u32::MAX] {
        let ix = live.witness_ix(w, bad_step);
        env.expect_err(&[&wk], &[ix], pe(PE::InvalidRunState), &watch);
    }
    // another client's index, an index out of range, a stranger
    let ix = retarget(live.witness_ix(w, step), &nk.pubkey());
    env.expect_err(&[&nk], &[ix], pe(PE::NotAClient), &watch);
    let mut ix = live.witness_ix(w, step);
    ix.data[8..12].copy_from_slice(&99u32.to_le_bytes());
    env.expect_err(&[&wk], &[ix], pe(PE::InvalidClientIndex), &watch);
    let stranger = env.keypair();
    let ix = retarget(live.witness_ix(w, step), &stranger.pubkey());
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    // malformed blooms: lengths and padding, each bloom
    let run = live.r.run;
    let good = vec![0u8; BLOOM_BYTES];
    let mut padded = good.clone();
    padded[BLOOM_BYTES - 1] = 1;
    for (p, b) in [
        (vec![0; BLOOM_BYTES - 1], good.clone()),
        (vec![0; BLOOM_BYTES + 1], good.clone()),
        (vec![], good.clone()),
        (padded.clone(), good.clone()),
        (good.clone(), padded.clone()),
        (good.clone(), vec![0; 508]),
    ] {
        let ix = run.witness(&wk.pubkey(), w as u32, step, p, b, [0; 32]);
        env.expect_err(&[&wk], &[ix], pe(PE::MalformedBloom), &watch);
    }
    // a bloom whose length prefix runs past the data does not deserialize
    let mut ix = live.witness_ix(w, step);
    ix.data.truncate(ix.data.len() - 40);
    env.expect_err(
        &[&wk],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &watch,
    );
    // the user not signing
    let ix = unsigned(live.witness_ix(w, step), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);

    // the witness, then the same again
    env.ok(&[&wk], &[live.witness_ix(w, step)]);
    env.expect_err(
        &[&wk],
        &[live.witness_ix(w, step)],
        pe(PE::DuplicateWitness),
        &watch,
    );
    // the other witness ends RoundTrain; a duplicate in RoundWitness is still a duplicate
    let w2 = witnesses[1];
    let w2k = live.client(w2).insecure_clone();
    env.ok(&[&w2k], &[live.witness_ix(w2, step)]);
    assert_eq!(env.run_state(&live.r), RunState::RoundWitness);
    env.expect_err(
        &[&w2k],
        &[live.witness_ix(w2, step)],
        pe(PE::DuplicateWitness),
        &watch,
    );
    // the round ends: a witness for the past round (its step) is refused in the next one
    env.advance(live.r.config.round_witness_time as i64 + 1);
    env.tick(&live.r);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().run_state(), RunState::RoundTrain);
    assert_eq!(s.get().header.step, step + 1);
    let w_now = elected_witnesses(s.get())[0];
    let k = live.client(w_now).insecure_clone();
    env.expect_err(
        &[&k],
        &[live.witness_ix(w_now, step)],
        pe(PE::InvalidRunState),
        &watch,
    );

    // outside a round: Warmup (InvalidRunState), Paused (Halted)
    let warm = env.warmup("wit-warm", 2, test_config(2));
    let k = warm.client(0).insecure_clone();
    env.expect_err(
        &[&k],
        &[warm.witness_ix(0, 1)],
        pe(PE::InvalidRunState),
        &warm.r.keys(),
    );
    env.pause(&warm.r);
    env.expect_err(
        &[&k],
        &[warm.witness_ix(0, 1)],
        pe(PE::Halted),
        &warm.r.keys(),
    );
}

/// The same instruction signed by another user (account 0).
fn retarget(mut ix: Instruction, user: &Pubkey) -> Instruction {
    ix.accounts[0].pubkey = *user;
    ix
}

#[test]
fn warmup_witness_refusals() {
    let mut env = Env::new();
    // WaitingForMembers
    let r = env.create_run("ww-wait", true, test_config(2));
    env.resume(&r);
    let c = env.keypair();
    env.join(&r, &c, None);
    let ix = r.run.warmup_witness(&c.pubkey(), 0);
    env.expect_err(&[&c], &[ix], pe(PE::InvalidRunState), &r.keys());

    let live = env.warmup("ww", 3, test_config(3));
    let watch = live.r.keys();
    let run = live.r.run;
    let stranger = env.keypair();
    // a stranger at a client's index, an index out of range, another client's index
    let ix = run.warmup_witness(&stranger.pubkey(), 0);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.warmup_witness(&stranger.pubkey(), 3);
    env.expect_err(&[&stranger], &[ix], pe(PE::InvalidClientIndex), &watch);
    let c0 = live.client(0).insecure_clone();
    let ix = run.warmup_witness(&c0.pubkey(), 1);
    env.expect_err(&[&c0], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.warmup_witness(&c0.pubkey(), u32::MAX);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidClientIndex), &watch);
    let ix = unsigned(run.warmup_witness(&c0.pubkey(), 0), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // once
    env.ok(&[&c0], &[run.warmup_witness(&c0.pubkey(), 0)]);
    let ix = run.warmup_witness(&c0.pubkey(), 0);
    env.expect_err(&[&c0], &[ix], pe(PE::DuplicateWitness), &watch);
    // training started (round 0 accepts late warmup witnesses); after round 0, refused
    env.warmup_done(&live);
    env.complete_round(&live);
    let ix = run.warmup_witness(&c0.pubkey(), 0);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidRunState), &watch);
    // halted
    env.pause(&r);
    let ix = r.run.warmup_witness(&c.pubkey(), 0);
    env.expect_err(&[&c], &[ix], pe(PE::Halted), &r.keys());
}

// ------------------------------------------------------------------------------ health

#[test]
fn health_check_refusals() {
    let mut env = Env::new();
    let live = env.round_train("hc", 4, test_config(4));
    let watch = live.r.keys();
    let run = live.r.run;
    let c0 = live.client(0).insecure_clone();
    // round 0 and 1: nothing two rounds back to judge
    let ix = run.health_check(&c0.pubkey(), 0, vec![1]);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidHealthCheck), &watch);
    assert_eq!(env.complete_round(&live), RunState::RoundTrain);
    assert_eq!(env.complete_round(&live), RunState::RoundTrain);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().current_round().height, 2);

    // a stranger, another client's index, an index out of range
    let stranger = env.keypair();
    let ix = run.health_check(&stranger.pubkey(), 0, vec![1]);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.health_check(&c0.pubkey(), 1, vec![1]);
    env.expect_err(&[&c0], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.health_check(&c0.pubkey(), 4, vec![1]);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidClientIndex), &watch);
    // no targets, more than 256
    let ix = run.health_check(&c0.pubkey(), 0, vec![]);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidHealthCheck), &watch);
    let ix = run.health_check(&c0.pubkey(), 0, vec![1; 257]);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidHealthCheck), &watch);
    // a target out of range, a healthy target (every witness vouched for everyone)
    let ix = run.health_check(&c0.pubkey(), 0, vec![4, 1]);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidClientIndex), &watch);
    let ix = run.health_check(&c0.pubkey(), 0, vec![1; 256]);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidHealthCheck), &watch);
    let ix = unsigned(run.health_check(&c0.pubkey(), 0, vec![1]), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);

    // outside a round
    let warm = env.warmup("hc-warm", 2, test_config(2));
    let k = warm.client(0).insecure_clone();
    let ix = warm.r.run.health_check(&k.pubkey(), 0, vec![1]);
    env.expect_err(&[&k], &[ix], pe(PE::InvalidRunState), &warm.r.keys());
}

// ------------------------------------------------------------------------------ checkpoint

#[test]
fn checkpoint_refusals() {
    let mut env = Env::new();
    let config = RunConfig {
        checkpointer_percent: 50,
        ..test_config(4)
    };
    // Warmup of a run with elected checkpointers: no round to elect them from
    let warm = env.warmup("ck", 4, config);
    let run = warm.r.run;
    let watch = warm.r.keys();
    let c0 = warm.client(0).insecure_clone();
    let ix = run.checkpoint(&c0.pubkey(), 0, "org/model", "main");
    env.expect_err(&[&c0], &[ix], pe(PE::NotACheckpointer), &watch);

    env.warmup_done(&warm);
    let s = env.state(&warm.r.account_key());
    let (yes, no): (Vec<usize>, Vec<usize>) =
        (0..4).partition(|&i| committee::is_checkpointer(s.get().current_round(), 50, i));
    assert_eq!(yes.len(), 2, "ceil(4 * 50%) checkpointers");
    let nk = warm.client(no[0]).insecure_clone();
    let ix = run.checkpoint(&nk.pubkey(), no[0] as u32, "org/model", "main");
    env.expect_err(&[&nk], &[ix], pe(PE::NotACheckpointer), &watch);
    // not a client, wrong index
    let stranger = env.keypair();
    let ix = run.checkpoint(&stranger.pubkey(), 0, "org/model", "main");
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.checkpoint(&nk.pubkey(), 9, "org/model", "main");
    env.expect_err(&[&nk], &[ix], pe(PE::InvalidClientIndex), &watch);
    // an elected checkpointer with a bad checkpoint
    let yk = warm.client(yes[0]).insecure_clone();
    let long = "m".repeat(65);
    for (repo, rev) in [
        ("", "main"),
        (long.as_str(), "main"),
        ("org/model", long.as_str()),
        ("org\0model", "main"),
        ("org/model", "ma\0in"),
    ] {
        let ix = run.checkpoint(&yk.pubkey(), yes[0] as u32, repo, rev);
        env.expect_err(&[&yk], &[ix], pe(PE::InvalidCheckpoint), &watch);
    }
    let ix = unsigned(
        run.checkpoint(&yk.pubkey(), yes[0] as u32, "org/model", "main"),
        0,
    );
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // halted: pausing in RoundTrain only takes effect after the epoch; a paused run refuses
    let halted = env.warmup("ck-halted", 2, test_config(2));
    env.pause(&halted.r);
    let k = halted.client(0).insecure_clone();
    let ix = halted.r.run.checkpoint(&k.pubkey(), 0, "org/model", "main");
    env.expect_err(&[&k], &[ix], pe(PE::Halted), &halted.r.keys());
}

// ------------------------------------------------------------------------------ withdraw

#[test]
fn withdraw_refusals() {
    let mut env = Env::new();
    let r = env.create_run("wd", true, test_config(2));
    env.resume(&r);
    let stranger = env.keypair();
    let ix = r.run.withdraw(&stranger.pubkey());
    env.expect_err(&[&stranger], &[ix], pe(PE::InvalidWithdraw), &r.keys());
    let c = env.keypair();
    env.join(&r, &c, None);
    env.ok(&[&c], &[r.run.withdraw(&c.pubkey())]);
    let ix = r.run.withdraw(&c.pubkey());
    env.expect_err(&[&c], &[ix], pe(PE::InvalidWithdraw), &r.keys());
    let ix = unsigned(r.run.withdraw(&c.pubkey()), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &r.keys());
    let live = finished_run(&mut env, "wd-done");
    let k = live.client(0).insecure_clone();
    let ix = live.r.run.withdraw(&k.pubkey());
    env.expect_err(&[&k], &[ix], pe(PE::RunFinished), &live.r.keys());
}

// ------------------------------------------------------------------------------ free

#[test]
fn free_coordinator_refusals() {
    let mut env = Env::new();
    let r = env.create_run("free", true, test_config(2));
    let other = env.create_run("free-2", true, test_config(2));
    let spill = Keypair::new();
    let mut watch = r.keys().to_vec();
    watch.extend(other.keys());
    watch.push(spill.pubkey());
    let auth = r.authority.insecure_clone();
    env.resume(&r);
    let ix = r.run.free_coordinator(&auth.pubkey(), &spill.pubkey());
    env.expect_err(&[&auth], &[ix], pe(PE::CloseNotHalted), &watch);
    env.pause(&r);
    let stranger = env.keypair();
    for signer in [&stranger, &r.join_authority, &other.authority] {
        let ix = r.run.free_coordinator(&signer.pubkey(), &spill.pubkey());
        env.expect_err(&[signer], &[ix], pe(PE::NotAuthority), &watch);
    }
    let mut ix = r.run.free_coordinator(&auth.pubkey(), &spill.pubkey());
    ix.accounts[3].pubkey = other.account_key();
    env.expect_err(&[&auth], &[ix], pe(PE::WrongCoordinatorAccount), &watch);
    let ix = unsigned(r.run.free_coordinator(&auth.pubkey(), &spill.pubkey()), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // the spill read-only: Anchor's mut constraint
    let mut ix = r.run.free_coordinator(&auth.pubkey(), &spill.pubkey());
    ix.accounts[1].is_writable = false;
    env.expect_err(&[&auth], &[ix], anchor(AE::ConstraintMut), &watch);
    // and the authority frees it
    env.ok(
        &[&auth],
        &[r.run.free_coordinator(&auth.pubkey(), &spill.pubkey())],
    );
    assert!(env.account(&r.instance()).is_none());
    assert!(env.account(&r.account_key()).is_none());
}

// ------------------------------------------------------------------------------ authorizations

#[test]
fn authorization_refusals() {
    let mut env = Env::new();
    let r = env.create_run("auth", false, test_config(2));
    let other = env.create_run("auth-2", false, test_config(2));
    let grantee = Pubkey::new_unique();
    let auth_key = authorization_key(&r.instance(), &grantee);
    let watch = [r.instance(), r.account_key(), auth_key];
    let payer = env.payer.pubkey();
    let stranger = env.keypair();
    // not the join authority: a stranger, the main authority, another run's join authority
    for signer in [&stranger, &r.authority, &other.join_authority] {
        let ix = r.run.authorize_joiner(&payer, &signer.pubkey(), grantee);
        env.expect_err(&[signer], &[ix], pe(PE::NotJoinAuthority), &watch);
    }
    let ja = r.join_authority.insecure_clone();
    let ix = unsigned(r.run.authorize_joiner(&payer, &ja.pubkey(), grantee), 1);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // an authorization address that is not the grantee's PDA
    let mut ix = r.run.authorize_joiner(&payer, &ja.pubkey(), grantee);
    ix.accounts[3].pubkey = authorization_key(&r.instance(), &stranger.pubkey());
    env.expect_err(&[&ja], &[ix], anchor(AE::ConstraintSeeds), &watch);
    // granted once; twice is refused by the system program (the PDA is in use)
    let granted = env.authorize(&r, &grantee);
    assert_eq!(granted, auth_key);
    let ix = r.run.authorize_joiner(&payer, &ja.pubkey(), grantee);
    env.expect_err(&[&ja], &[ix], custom_at(0, 0), &watch);

    // revoke: not the join authority
    let spill = Pubkey::new_unique();
    for signer in [&stranger, &r.authority, &other.join_authority] {
        let ix = r.run.revoke_joiner(&signer.pubkey(), &spill, &grantee);
        env.expect_err(&[signer], &[ix], pe(PE::NotJoinAuthority), &watch);
    }
    let ix = unsigned(r.run.revoke_joiner(&ja.pubkey(), &spill, &grantee), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // another run's authorization through this run
    let other_auth = env.authorize(&other, &grantee);
    let mut ix = r.run.revoke_joiner(&ja.pubkey(), &spill, &grantee);
    ix.accounts[3].pubkey = other_auth;
    let mut w = watch.to_vec();
    w.push(other_auth);
    env.expect_err(&[&ja], &[ix], pe(PE::AuthorizationMismatch), &w);
    // something that is not an authorization (the run's instance)
    let mut ix = r.run.revoke_joiner(&ja.pubkey(), &spill, &grantee);
    ix.accounts[3].pubkey = other.instance();
    env.expect_err(&[&ja], &[ix], anchor(AE::AccountDiscriminatorMismatch), &w);
    // revoked once; then it is gone
    env.ok(
        &[&ja],
        &[r.run.revoke_joiner(&ja.pubkey(), &spill, &grantee)],
    );
    assert!(env.account(&auth_key).is_none());
    let ix = r.run.revoke_joiner(&ja.pubkey(), &spill, &grantee);
    env.expect_err(&[&ja], &[ix], anchor(AE::AccountNotInitialized), &watch);
}

// ------------------------------------------------------------------------------ data

/// Arguments that Anchor cannot decode never reach a handler: every instruction with its
/// data cut short by one byte.
#[test]
fn truncated_arguments_do_not_deserialize() {
    let mut env = Env::new();
    let live = env.round_train("data", 2, test_config(2));
    let r = &live.r;
    let c = live.client(0).insecure_clone();
    let ck = c.pubkey();
    let auth = r.authority.insecure_clone();
    let cases: Vec<(Instruction, &Keypair)> = vec![
        (
            r.run.update(
                &auth.pubkey(),
                Some(RunConfigParams::from_core(&r.config)),
                None,
            ),
            &auth,
        ),
        (r.run.set_paused(&auth.pubkey(), true), &auth),
        (r.run.join_run(&ck, None, [1; 32]), &c),
        (live.witness_ix(0, 1), &c),
        (r.run.warmup_witness(&ck, 0), &c),
        (r.run.health_check(&ck, 0, vec![1, 2]), &c),
        (r.run.checkpoint(&ck, 0, "org/model", "main"), &c),
    ];
    for (ix, signer) in cases {
        assert!(ix.data.len() > 8);
        let mut short = ix.clone();
        short.data.pop();
        env.expect_err(
            &[signer],
            &[short],
            anchor(AE::InstructionDidNotDeserialize),
            &r.keys(),
        );
    }
    // an init whose borsh args stop inside the config
    let blank = preallocate(&mut env, CoordinatorAccount::SPACE, &PROGRAM_ID);
    let mut ix = init_ix(&env, &blank.pubkey(), "trunc", &test_config(2));
    ix.data.truncate(ix.data.len() - 20);
    env.expect_err(
        &[],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &[blank.pubkey(), instance_key("trunc")],
    );
}

#[test]
fn every_refusal_leaves_a_usable_run() {
    // After the refusals above a run still completes rounds: a smoke check that nothing in
    // the error paths leaves a borrowed or half-written account behind.
    let mut env = Env::new();
    let live = env.round_train("after", 4, test_config(4));
    let s = env.state(&live.r.account_key());
    let n = non_witnesses(s.get())[0];
    let nk = live.client(n).insecure_clone();
    let step = s.get().header.step;
    env.expect_err(
        &[&nk],
        &[live.witness_ix(n, step)],
        pe(PE::NotAWitness),
        &live.r.keys(),
    );
    assert_eq!(env.complete_round(&live), RunState::RoundTrain);
    assert_eq!(env.state(&live.r.account_key()).get().header.step, step + 1);
}

// ------------------------------------------------------------------------------ known issues

/// Anchor 0.31's on-chain IDL instructions check `IdlCreateBuffer`'s `#[account(zero)]`
/// buffer with `&data[..8]` before any length check (anchor-syn `generate_constraint_zeroed`):
/// a buffer account under 8 bytes made the program panic. Found by the fuzzer
/// (`PSYCHE_FUZZ_SEED=2`, iteration 6898); the program is now built with `no-idl` (no
/// on-chain IDL instructions), so the instruction is refused by name.
#[test]
fn idl_create_buffer_with_an_empty_account_is_refused_by_name() {
    let mut env = Env::new();
    let signer = env.keypair();
    let mut data = anchor_lang::idl::IDL_IX_TAG.to_le_bytes().to_vec();
    data.push(1); // IdlInstruction::CreateBuffer
    for buffer in [Pubkey::new_unique(), env.payer.pubkey()] {
        let ix = Instruction {
            program_id: PROGRAM_ID,
            accounts: vec![
                AccountMeta::new(buffer, false),
                AccountMeta::new_readonly(signer.pubkey(), true),
            ],
            data: data.clone(),
        };
        let err = env.send(&[&signer], &[ix]).unwrap_err();
        assert!(
            matches!(
                err,
                solana_transaction_error::TransactionError::InstructionError(
                    0,
                    solana_instruction::error::InstructionError::Custom(_)
                )
            ),
            "buffer {buffer}: {err:?} (a panic in the program)"
        );
    }
}

/// On a validator the CPI syscall fails the instruction with the runtime's error; the native
/// shim must do the same (`cpi.rs` keeps the error for `native::run_entry`), also for runtime errors that have no
/// `ProgramError` counterpart. Here: `init_coordinator` with the instance PDA passed
/// read-only, whose `create_account` CPI escalates the writable privilege.
#[test]
fn cpi_runtime_errors_keep_their_names() {
    let mut env = Env::new();
    let blank = preallocate(&mut env, CoordinatorAccount::SPACE, &PROGRAM_ID);
    let mut ix = init_ix(&env, &blank.pubkey(), "ro", &test_config(2));
    ix.accounts[1].is_writable = false;
    env.expect_err(
        &[],
        &[ix],
        solana_transaction_error::TransactionError::InstructionError(
            0,
            solana_instruction::error::InstructionError::PrivilegeEscalation,
        ),
        &[blank.pubkey(), instance_key("ro")],
    );
}
