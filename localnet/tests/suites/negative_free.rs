//! `free_coordinator`: only a halted run, by its main authority, with its own accounts.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

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
