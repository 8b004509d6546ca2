//! `tick`: a halted run refuses it, and the user must sign.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

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
