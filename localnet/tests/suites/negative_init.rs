//! `init_coordinator`: wrong sizes, reused accounts, bad run ids and configs, wrong accounts.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::{CoordinatorAccount, CoordinatorProgramError as PE};
use psyche_coordinator_core::RunConfig;
use psyche_localnet::ix::{instance_key, PROGRAM_ID};
use solana_instruction::AccountMeta;
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

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
