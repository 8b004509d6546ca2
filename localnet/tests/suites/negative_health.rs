//! `health_check`: too early, not a client, bad targets, healthy targets.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::RunState;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

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
