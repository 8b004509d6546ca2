//! `withdraw`: only a client, once, and not from a finished run.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

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
