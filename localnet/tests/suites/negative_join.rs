//! `join_run`: authorizations, duplicates, a full run, a finished one.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::{RunConfig, RunState};
use psyche_localnet::ix::authorization_key;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

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
fn join_run_refuses_a_joiner_past_capacity() {
    let mut env = Env::new();
    let config = RunConfig {
        max_clients: 2,
        max_syncing: 1,
        ..test_config(2)
    };
    // for the next epoch: two members, a third is refused
    let r = env.create_run("cap", true, config);
    env.resume(&r);
    let (a, b, c) = (env.keypair(), env.keypair(), env.keypair());
    env.join(&r, &a, None);
    env.join(&r, &b, None);
    let ix = r.run.join_run(&c.pubkey(), None, [3; 32]);
    env.expect_err(&[&c], &[ix], pe(PE::RunFull), &r.keys());
    // mid-epoch: the run's two clients fill it
    let live = env.round_train("cap-live", 2, config);
    let ix = live.r.run.join_run(&c.pubkey(), None, [3; 32]);
    env.expect_err(&[&c], &[ix], pe(PE::RunFull), &live.r.keys());
    // a client of this epoch may still join the next one
    let k = live.client(0).insecure_clone();
    env.join(&live.r, &k, None);
}

/// 256 joiners fill the run (`max_clients` 256): the 257th is refused by capacity, checked
/// before the list's own room (`ClientsFull`, which the vectors reach).
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
    // funded: a joiner pays for its new contributor account
    for _ in 0..psyche_coordinator_core::MAX_CLIENTS {
        let c = env.keypair();
        env.ok(&[&c], &[r.run.join_run(&c.pubkey(), None, [1; 32])]);
    }
    let c = env.keypair();
    let ix = r.run.join_run(&c.pubkey(), None, [1; 32]);
    env.expect_err(&[&c], &[ix], pe(PE::RunFull), &r.keys());
}
