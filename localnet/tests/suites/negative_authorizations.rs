//! `authorize_joiner` and `revoke_joiner`: only the join authority, only the run's own
//! authorizations.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_localnet::ix::authorization_key;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

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
