//! `witness` and `warmup_witness`: elections, steps, indices, blooms, duplicates, run states.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::{RunState, BLOOM_BYTES};
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

#[test]
fn witness_refusals() {
    let mut env = Env::new();
    let live = env.round_train("wit", 4, test_config(4));
    let watch = live.r.keys();
    let s = env.state(&live.r.account_key());
    let step = s.get().header.step;
    let witnesses = elected_witnesses(s.get());
    let others = non_witnesses(s.get());
    assert_eq!(witnesses.len(), 2);
    assert_eq!(others.len(), 2);
    let (w, n) = (witnesses[0], others[0]);
    let wk = live.client(w).insecure_clone();

    // a client that is not elected
    let nk = live.client(n).insecure_clone();
    env.expect_err(
        &[&nk],
        &[live.witness_ix(n, step)],
        pe(PE::NotAWitness),
        &watch,
    );
    // wrong steps
    for bad_step in [step + 1, step - 1, 0, u32::MAX] {
        let ix = live.witness_ix(w, bad_step);
        env.expect_err(&[&wk], &[ix], pe(PE::InvalidRunState), &watch);
    }
    // another client's index, an index out of range, a stranger
    let ix = retarget(live.witness_ix(w, step), &nk.pubkey());
    env.expect_err(&[&nk], &[ix], pe(PE::NotAClient), &watch);
    let mut ix = live.witness_ix(w, step);
    ix.data[8..12].copy_from_slice(&99u32.to_le_bytes());
    env.expect_err(&[&wk], &[ix], pe(PE::InvalidClientIndex), &watch);
    let stranger = env.keypair();
    let ix = retarget(live.witness_ix(w, step), &stranger.pubkey());
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    // malformed blooms: lengths and padding, each bloom
    let run = live.r.run;
    let good = vec![0u8; BLOOM_BYTES];
    let mut padded = good.clone();
    padded[BLOOM_BYTES - 1] = 1;
    for (p, b) in [
        (vec![0; BLOOM_BYTES - 1], good.clone()),
        (vec![0; BLOOM_BYTES + 1], good.clone()),
        (vec![], good.clone()),
        (padded.clone(), good.clone()),
        (good.clone(), padded.clone()),
        (good.clone(), vec![0; 508]),
    ] {
        let ix = run.witness(&wk.pubkey(), w as u32, step, p, b, [0; 32], params_at(step));
        env.expect_err(&[&wk], &[ix], pe(PE::MalformedBloom), &watch);
    }
    // a bloom whose length prefix runs past the data does not deserialize
    let mut ix = live.witness_ix(w, step);
    ix.data.truncate(ix.data.len() - 40);
    env.expect_err(
        &[&wk],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &watch,
    );
    // the user not signing
    let ix = unsigned(live.witness_ix(w, step), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);

    // the witness, then the same again
    env.ok(&[&wk], &[live.witness_ix(w, step)]);
    env.expect_err(
        &[&wk],
        &[live.witness_ix(w, step)],
        pe(PE::DuplicateWitness),
        &watch,
    );
    // the other witness ends RoundTrain; a duplicate in RoundWitness is still a duplicate
    let w2 = witnesses[1];
    let w2k = live.client(w2).insecure_clone();
    env.ok(&[&w2k], &[live.witness_ix(w2, step)]);
    assert_eq!(env.run_state(&live.r), RunState::RoundWitness);
    env.expect_err(
        &[&w2k],
        &[live.witness_ix(w2, step)],
        pe(PE::DuplicateWitness),
        &watch,
    );
    // the round ends: a witness for the past round (its step) is refused in the next one
    env.advance(live.r.config.round_witness_time as i64 + 1);
    env.tick(&live.r);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().run_state(), RunState::RoundTrain);
    assert_eq!(s.get().header.step, step + 1);
    let w_now = elected_witnesses(s.get())[0];
    let k = live.client(w_now).insecure_clone();
    env.expect_err(
        &[&k],
        &[live.witness_ix(w_now, step)],
        pe(PE::InvalidRunState),
        &watch,
    );

    // outside a round: Warmup (InvalidRunState), Paused (Halted)
    let warm = env.warmup("wit-warm", 2, test_config(2));
    let k = warm.client(0).insecure_clone();
    env.expect_err(
        &[&k],
        &[warm.witness_ix(0, 1)],
        pe(PE::InvalidRunState),
        &warm.r.keys(),
    );
    env.pause(&warm.r);
    env.expect_err(
        &[&k],
        &[warm.witness_ix(0, 1)],
        pe(PE::Halted),
        &warm.r.keys(),
    );
}

#[test]
fn warmup_witness_refusals() {
    let mut env = Env::new();
    // WaitingForMembers
    let r = env.create_run("ww-wait", true, test_config(2));
    env.resume(&r);
    let c = env.keypair();
    env.join(&r, &c, None);
    let ix = r.run.warmup_witness(&c.pubkey(), 0);
    env.expect_err(&[&c], &[ix], pe(PE::InvalidRunState), &r.keys());

    let live = env.warmup("ww", 3, test_config(3));
    let watch = live.r.keys();
    let run = live.r.run;
    let stranger = env.keypair();
    // a stranger at a client's index, an index out of range, another client's index
    let ix = run.warmup_witness(&stranger.pubkey(), 0);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.warmup_witness(&stranger.pubkey(), 3);
    env.expect_err(&[&stranger], &[ix], pe(PE::InvalidClientIndex), &watch);
    let c0 = live.client(0).insecure_clone();
    let ix = run.warmup_witness(&c0.pubkey(), 1);
    env.expect_err(&[&c0], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.warmup_witness(&c0.pubkey(), u32::MAX);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidClientIndex), &watch);
    let ix = unsigned(run.warmup_witness(&c0.pubkey(), 0), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // once
    env.ok(&[&c0], &[run.warmup_witness(&c0.pubkey(), 0)]);
    let ix = run.warmup_witness(&c0.pubkey(), 0);
    env.expect_err(&[&c0], &[ix], pe(PE::DuplicateWitness), &watch);
    // training started (round 0 accepts late warmup witnesses); after round 0, refused
    env.warmup_done(&live);
    env.complete_round(&live);
    let ix = run.warmup_witness(&c0.pubkey(), 0);
    env.expect_err(&[&c0], &[ix], pe(PE::InvalidRunState), &watch);
    // halted
    env.pause(&r);
    let ix = r.run.warmup_witness(&c.pubkey(), 0);
    env.expect_err(&[&c], &[ix], pe(PE::Halted), &r.keys());
}
