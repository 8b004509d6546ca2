//! `synced`: only a Syncing client, in a round, with the agreed step and parameter hash.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::{ClientPhase, RunConfig};
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

/// Joins mid-epoch are on, one client syncs at a time.
fn sync_config() -> RunConfig {
    RunConfig {
        max_syncing: 1,
        ..test_config(2)
    }
}

#[test]
fn synced_refusals() {
    let mut env = Env::new();
    // WaitingForMembers: not a round
    let r = env.create_run("sy-wait", true, sync_config());
    env.resume(&r);
    let c = env.keypair();
    env.join(&r, &c, None);
    let ix = r.run.synced(&c.pubkey(), 0, 1, [1; 32]);
    env.expect_err(&[&c], &[ix], pe(PE::InvalidRunState), &r.keys());

    // Warmup: not a round either
    let warm = env.warmup("sy-warm", 2, sync_config());
    let k = warm.client(0).insecure_clone();
    let ix = warm.r.run.synced(&k.pubkey(), 0, 1, [1; 32]);
    env.expect_err(&[&k], &[ix], pe(PE::InvalidRunState), &warm.r.keys());

    let live = env.round_train("sy", 2, sync_config());
    let watch = live.r.keys();
    let run = live.r.run;
    let stranger = env.keypair();
    let ix = run.synced(&stranger.pubkey(), 0, 1, [1; 32]);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.synced(&stranger.pubkey(), 5, 1, [1; 32]);
    env.expect_err(&[&stranger], &[ix], pe(PE::InvalidClientIndex), &watch);
    // an Active client has nothing to sync
    let c0 = live.client(0).insecure_clone();
    let ix = run.synced(&c0.pubkey(), 0, 1, [1; 32]);
    env.expect_err(&[&c0], &[ix], pe(PE::WrongPhase), &watch);
    // a joiner mid-epoch syncs at once (a free slot); nothing is agreed yet
    let d = env.keypair();
    env.join(&live.r, &d, None);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().clients()[2].phase(), ClientPhase::Syncing);
    let ix = run.synced(&d.pubkey(), 2, 0, [0; 32]);
    env.expect_err(&[&d], &[ix], pe(PE::SyncHashMismatch), &watch);
    let ix = unsigned(run.synced(&d.pubkey(), 2, 0, [0; 32]), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // a round agrees on parameters: a stale step or another hash is refused
    env.complete_round(&live);
    let s = env.state(&live.r.account_key());
    let (step, hash) = (s.get().param_step, s.get().param_hash);
    assert_ne!(step, 0, "the round's witnesses agreed");
    let ix = run.synced(&d.pubkey(), 2, step - 1, hash);
    env.expect_err(&[&d], &[ix], pe(PE::SyncHashMismatch), &watch);
    let ix = run.synced(&d.pubkey(), 2, step, [7; 32]);
    env.expect_err(&[&d], &[ix], pe(PE::SyncHashMismatch), &watch);
    let ix = run.synced(&d.pubkey(), 2, step + 1, hash);
    env.expect_err(&[&d], &[ix], pe(PE::SyncHashMismatch), &watch);
    // the agreed pair: WarmingUp; once only
    env.ok(&[&d], &[run.synced(&d.pubkey(), 2, step, hash)]);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().clients()[2].phase(), ClientPhase::WarmingUp);
    let ix = run.synced(&d.pubkey(), 2, step, hash);
    env.expect_err(&[&d], &[ix], pe(PE::WrongPhase), &watch);

    // halted
    env.pause(&r);
    let ix = r.run.synced(&c.pubkey(), 0, 1, [1; 32]);
    env.expect_err(&[&c], &[ix], pe(PE::Halted), &r.keys());
}
