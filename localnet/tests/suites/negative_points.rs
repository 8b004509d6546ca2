//! Points: `join_run` as a delegate (`NotADelegate`, a permissioned run's authorization is the
//! identity's), `set_delegates` (`TooManyDelegates`), `settle_points` (`WrongContributor`,
//! `NothingToSettle`, `InvalidClientIndex`), `update` with unsettled points
//! (`PointsUnsettled`), and the new epoch that waits for the last settle.

use anchor_lang::error::ErrorCode as AE;
use anchor_lang::AccountDeserialize;
use psyche_coordinator::{Contributor, CoordinatorProgramError as PE, RunConfigParams};
use psyche_coordinator_core::{self as core_sm, Points, RunConfig, RunState};
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

fn contributor(env: &Env, key: &Pubkey) -> Contributor {
    Contributor::try_deserialize(&mut &env.data(key)[..]).expect("a contributor account")
}

#[test]
fn join_run_as_a_delegate() {
    let mut env = Env::new();
    let r = env.create_run("deleg", true, test_config(2));
    env.resume(&r);
    let (identity, node, stranger) = (env.keypair(), env.keypair(), env.keypair());
    let (id, nk) = (identity.pubkey(), node.pubkey());
    let account = r.run.contributor(&id);
    let mut watch = r.keys().to_vec();
    watch.push(account);
    // no contributor account for the identity yet: the one the join would create lists nobody
    let ix = r.run.join_run_as(&nk, None, [1; 32], &id);
    env.expect_err(&[&node], &[ix], pe(PE::NotADelegate), &watch);
    assert!(env.account(&account).is_none());
    // the identity lists the node; a stranger is still refused
    let payer = env.payer.pubkey();
    env.ok(&[&identity], &[r.run.set_delegates(&payer, &id, vec![nk])]);
    let c = contributor(&env, &account);
    assert_eq!((c.identity, c.delegates.clone()), (id, vec![nk]));
    assert_eq!(c.coordinator_instance, r.instance());
    let ix = r.run.join_run_as(&stranger.pubkey(), None, [2; 32], &id);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotADelegate), &watch);
    // the contributor account passed must be the identity's PDA
    let mut ix = r.run.join_run_as(&nk, None, [1; 32], &id);
    ix.accounts[4].pubkey = r.run.contributor(&nk);
    env.expect_err(&[&node], &[ix], anchor(AE::ConstraintSeeds), &watch);
    // the delegate joins: its points go to the identity
    env.ok(&[&node], &[r.run.join_run_as(&nk, None, [1; 32], &id)]);
    let s = env.state(&r.account_key());
    let joined = s.get().pending()[0];
    assert_eq!((joined.signer, joined.identity), (nk.to_bytes(), id.to_bytes()));
    // joining as itself creates its own contributor account, paid by the signer
    env.ok(&[&stranger], &[r.run.join_run(&stranger.pubkey(), None, [2; 32])]);
    let own = contributor(&env, &r.run.contributor(&stranger.pubkey()));
    assert_eq!((own.identity, own.delegates.len()), (stranger.pubkey(), 0));

    // a permissioned run: the authorization must be the identity's, and covers its delegates
    let closed = env.create_run("deleg-closed", false, test_config(2));
    env.resume(&closed);
    env.ok(
        &[&identity],
        &[closed.run.set_delegates(&payer, &id, vec![nk])],
    );
    let mut watch = closed.keys().to_vec();
    watch.push(closed.run.contributor(&id));
    let ix = closed.run.join_run_as(&nk, None, [1; 32], &id);
    env.expect_err(&[&node], &[ix], pe(PE::NotAuthorized), &watch);
    let node_auth = env.authorize(&closed, &nk);
    let ix = closed.run.join_run_as(&nk, Some(node_auth), [1; 32], &id);
    env.expect_err(&[&node], &[ix], pe(PE::SignerMismatch), &watch);
    let id_auth = env.authorize(&closed, &id);
    env.ok(
        &[&node],
        &[closed.run.join_run_as(&nk, Some(id_auth), [1; 32], &id)],
    );
    // the node joining as itself needs its own authorization
    let ix = closed.run.join_run(&nk, Some(id_auth), [1; 32]);
    env.expect_err(&[&node], &[ix], pe(PE::SignerMismatch), &closed.keys());
}

#[test]
fn set_delegates_refusals() {
    let mut env = Env::new();
    let r = env.create_run("deleg-set", true, test_config(2));
    let identity = env.keypair();
    let id = identity.pubkey();
    let account = r.run.contributor(&id);
    let mut watch = r.keys().to_vec();
    watch.push(account);
    let payer = env.payer.pubkey();
    let nine: Vec<Pubkey> = (0..9).map(|_| Pubkey::new_unique()).collect();
    let ix = r.run.set_delegates(&payer, &id, nine.clone());
    env.expect_err(&[&identity], &[ix], pe(PE::TooManyDelegates), &watch);
    assert!(env.account(&account).is_none());
    // only the identity itself sets its list
    let ix = unsigned(r.run.set_delegates(&payer, &id, vec![]), 1);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    let mut ix = r.run.set_delegates(&payer, &id, vec![]);
    ix.accounts[3].pubkey = r.run.contributor(&payer);
    env.expect_err(&[&identity], &[ix], anchor(AE::ConstraintSeeds), &watch);
    // 8 is the most; the list is replaced, not appended to
    env.ok(
        &[&identity],
        &[r.run.set_delegates(&payer, &id, nine[..8].to_vec())],
    );
    assert_eq!(contributor(&env, &account).delegates, nine[..8].to_vec());
    let ix = r.run.set_delegates(&payer, &id, nine.clone());
    env.expect_err(&[&identity], &[ix], pe(PE::TooManyDelegates), &watch);
    env.ok(
        &[&identity],
        &[r.run.set_delegates(&payer, &id, vec![nine[8]])],
    );
    assert_eq!(contributor(&env, &account).delegates, vec![nine[8]]);
}

#[test]
fn settle_points_refusals_and_the_epoch_gate() {
    let mut env = Env::new();
    let live = env.round_train("settle", 2, test_config(2));
    let r = &live.r;
    let (c0, c1) = (live.client(0).insecure_clone(), live.client(1).insecure_clone());
    let (k0, k1) = (c0.pubkey(), c1.pubkey());
    let (a0, a1) = (r.run.contributor(&k0), r.run.contributor(&k1));
    let mut watch = r.keys().to_vec();
    watch.extend([a0, a1]);
    let payer = env.payer.pubkey();
    // nothing earned before a round ends
    let ix = r.run.settle_points(&payer, 0, &k0);
    env.expect_err(&[], &[ix], pe(PE::NothingToSettle), &watch);
    // two rounds, then a pause (the round ends, Cooldown, Paused): three rounds present
    assert_eq!(env.complete_round(&live), RunState::RoundTrain);
    assert_eq!(env.complete_round(&live), RunState::RoundTrain);
    env.pause(r);
    assert_eq!(env.complete_round(&live), RunState::Cooldown);
    env.advance(r.config.cooldown_time as i64 + 1);
    env.tick(r);
    assert_eq!(env.run_state(r), RunState::Paused);
    let s = env.state(&r.account_key());
    let slot = s.get().clients()[0];
    assert_eq!(slot.presence, 3);
    assert!(slot.sequences > 0, "vouched for by every witness");

    // another identity's account, an index past the clients, an account that does not exist,
    // an unsigned user
    let ix = r.run.settle_points(&payer, 0, &k1);
    env.expect_err(&[], &[ix], pe(PE::WrongContributor), &watch);
    let ix = r.run.settle_points(&payer, 2, &k0);
    env.expect_err(&[], &[ix], pe(PE::InvalidClientIndex), &watch);
    let ix = r.run.settle_points(&payer, 0, &Pubkey::new_unique());
    env.expect_err(&[], &[ix], anchor(AE::AccountNotInitialized), &watch);
    let stranger = env.keypair();
    let ix = unsigned(r.run.settle_points(&stranger.pubkey(), 0, &k0), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // a config change waits for the slots' points; the same config passes
    let auth = r.authority.insecure_clone();
    let changed = RunConfigParams::from_core(&RunConfig {
        presence_points: 5,
        ..r.config
    });
    let ix = r.run.update(&auth.pubkey(), Some(changed), None);
    env.expect_err(&[&auth], &[ix], pe(PE::PointsUnsettled), &watch);
    let same = RunConfigParams::from_core(&r.config);
    env.ok(&[&auth], &[r.run.update(&auth.pubkey(), Some(same), None)]);

    // anyone settles: the contributor account gets the core's credit
    let moved = core_sm::pending_credit(s.get(), 0).unwrap();
    env.ok(&[&stranger], &[r.run.settle_points(&stranger.pubkey(), 0, &k0)]);
    let want = core_sm::credit(&Points::new(k0.to_bytes()), &moved, &r.config).unwrap();
    assert_eq!(contributor(&env, &a0).points(), want);
    assert_eq!(want.presence_points, 3);
    assert!(!env.state(&r.account_key()).get().clients()[0].unsettled());
    let ix = r.run.settle_points(&payer, 0, &k0);
    env.expect_err(&[], &[ix], pe(PE::NothingToSettle), &watch);

    // resumed: both join the next epoch, but it starts only once slot 1 is settled
    env.resume(r);
    env.join(r, &c0, None);
    env.join(r, &c1, None);
    env.advance(r.config.waiting_for_members_extra_time as i64 + 1);
    env.tick(r);
    assert_eq!(env.run_state(r), RunState::WaitingForMembers);
    let s = env.state(&r.account_key());
    assert_eq!(core_sm::tick_deadline(s.get()), None);
    env.ok(&[], &[r.run.settle_points(&payer, 1, &k1)]);
    assert_eq!(env.run_state(r), RunState::Warmup, "the settle's tick starts the epoch");
    assert_eq!(contributor(&env, &a1).presence_rounds, 3);
}
