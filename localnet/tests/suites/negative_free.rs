//! `free_coordinator` and `free_run_spec`: only a halted run, by its main authority, with its
//! own accounts.

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

#[test]
fn free_run_spec_returns_the_spec_accounts_rent_before_the_run_is_freed() {
    let mut env = Env::new();
    let r = env.create_run("free-spec", true, test_config(2));
    let other = env.create_run("free-spec-2", true, test_config(2));
    let auth = r.authority.insecure_clone();
    let spill = Keypair::new();
    let spec_key = r.run.run_spec();
    let ix = r.run.set_run_spec(&auth.pubkey(), 3, 0, b"abc".to_vec());
    env.ok(&[&auth], &[ix]);
    let ix = other
        .run
        .set_run_spec(&other.authority.pubkey(), 3, 0, b"xyz".to_vec());
    env.ok(&[&other.authority], &[ix]);
    let rent = env.account(&spec_key).expect("the spec account").lamports;
    let mut watch = r.keys().to_vec();
    watch.extend([spec_key, other.run.run_spec(), spill.pubkey()]);
    env.resume(&r);
    let ix = r.run.free_run_spec(&auth.pubkey(), &spill.pubkey());
    env.expect_err(&[&auth], &[ix], pe(PE::CloseNotHalted), &watch);
    env.pause(&r);
    let stranger = env.keypair();
    for signer in [&stranger, &r.join_authority, &other.authority] {
        let ix = r.run.free_run_spec(&signer.pubkey(), &spill.pubkey());
        env.expect_err(&[signer], &[ix], pe(PE::NotAuthority), &watch);
    }
    // another run's coordinator account, or its spec account: refused
    let mut ix = r.run.free_run_spec(&auth.pubkey(), &spill.pubkey());
    ix.accounts[3].pubkey = other.account_key();
    env.expect_err(&[&auth], &[ix], pe(PE::WrongCoordinatorAccount), &watch);
    let mut ix = r.run.free_run_spec(&auth.pubkey(), &spill.pubkey());
    ix.accounts[4].pubkey = other.run.run_spec();
    env.expect_err(&[&auth], &[ix], anchor(AE::ConstraintSeeds), &watch);
    // the spec account, then the run, in one transaction, as close-run sends them
    env.ok(
        &[&auth],
        &[
            r.run.free_run_spec(&auth.pubkey(), &spill.pubkey()),
            r.run.free_coordinator(&auth.pubkey(), &spill.pubkey()),
        ],
    );
    assert!(env.account(&spec_key).is_none());
    assert!(env.account(&r.instance()).is_none());
    assert!(env.account(&other.run.run_spec()).is_some());
    assert!(env.account(&spill.pubkey()).expect("spill").lamports > rent);
}
