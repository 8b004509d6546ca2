//! `resync`: only an Active or WarmingUp client, in Warmup or a round.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::{ClientPhase, RunConfig};
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

#[test]
fn resync_refusals() {
    let mut env = Env::new();
    let config = RunConfig {
        max_syncing: 1,
        ..test_config(2)
    };
    // WaitingForMembers
    let r = env.create_run("rs-wait", true, config);
    env.resume(&r);
    let c = env.keypair();
    env.join(&r, &c, None);
    let ix = r.run.resync(&c.pubkey(), 0);
    env.expect_err(&[&c], &[ix], pe(PE::InvalidRunState), &r.keys());

    let live = env.round_train("rs", 2, config);
    let watch = live.r.keys();
    let run = live.r.run;
    let stranger = env.keypair();
    let ix = run.resync(&stranger.pubkey(), 0);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.resync(&stranger.pubkey(), 2);
    env.expect_err(&[&stranger], &[ix], pe(PE::InvalidClientIndex), &watch);
    // two joiners mid-epoch: the first syncs, the second waits in the queue; neither may
    // resync
    let (d, e) = (env.keypair(), env.keypair());
    env.join(&live.r, &d, None);
    env.join(&live.r, &e, None);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().clients()[2].phase(), ClientPhase::Syncing);
    assert_eq!(s.get().clients()[3].phase(), ClientPhase::Queued);
    let ix = run.resync(&d.pubkey(), 2);
    env.expect_err(&[&d], &[ix], pe(PE::WrongPhase), &watch);
    let ix = run.resync(&e.pubkey(), 3);
    env.expect_err(&[&e], &[ix], pe(PE::WrongPhase), &watch);
    let c0 = live.client(0).insecure_clone();
    let ix = unsigned(run.resync(&c0.pubkey(), 0), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // an Active client lags: Syncing at once (it does not queue), and only once
    env.ok(&[&c0], &[run.resync(&c0.pubkey(), 0)]);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().clients()[0].phase(), ClientPhase::Syncing);
    let ix = run.resync(&c0.pubkey(), 0);
    env.expect_err(&[&c0], &[ix], pe(PE::WrongPhase), &watch);

    // a finished run
    let done = finished_run(&mut env, "rs-done");
    let k = done.client(0).insecure_clone();
    let ix = done.r.run.resync(&k.pubkey(), 0);
    env.expect_err(&[&k], &[ix], pe(PE::Halted), &done.r.keys());
}
