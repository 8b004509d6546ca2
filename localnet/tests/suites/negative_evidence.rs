//! `evidence`: outside a round, not a client, wrong step, not a verifier, bad, untrained or
//! unsampled targets, a second accusation, the round's accused mask. (Eviction at the quorum and
//! the evicted signer's refused join: the conformance vectors, which the program replays.)

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::{
    batch_mask, committee, in_verification_sample, ClientState, CoordinatorState, RunState,
};
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

/// The elected verifiers of the current round (client indices, ascending).
fn verifiers(s: &CoordinatorState) -> Vec<usize> {
    let mut out = [0u8; psyche_coordinator_core::MAX_CLIENTS];
    let n = committee::verifiers(s.current_round(), s.config.verification_percent, &mut out);
    out[..n].iter().map(|&i| i as usize).collect()
}

/// The clients with a batch in the current round (ascending).
fn trainers(s: &CoordinatorState) -> Vec<usize> {
    let mask = batch_mask(&s.config, s.current_round());
    (0..s.clients().len())
        .filter(|&i| (mask[i / 8] >> (i % 8)) & 1 == 1)
        .collect()
}

#[test]
fn evidence_refusals_and_eviction() {
    let mut env = Env::new();
    let mut config = test_config(8);
    config.verification_percent = 25;
    config.evidence_quorum = 2;
    let live = env.round_train("ev", 8, config);
    let watch = live.r.keys();
    let run = live.r.run;
    let s = env.state(&live.r.account_key());
    let step = s.get().header.step;
    let (v, t) = (verifiers(s.get()), trainers(s.get()));
    assert_eq!((v.len(), t.len()), (2, 6));
    let key = |i: usize| live.client(i).insecure_clone();
    let (v0, v1, t0) = (key(v[0]), key(v[1]), key(t[0]));
    let (i0, i1) = (v[0] as u32, v[1] as u32);
    let sampled = |verifier: usize| -> Vec<usize> {
        let st = s.get();
        t.iter()
            .copied()
            .filter(|&x| in_verification_sample(&st.config, st.current_round(), verifier, x))
            .collect()
    };
    let (mine, theirs) = (sampled(v[0]), sampled(v[1]));
    assert_eq!((mine.len(), theirs.len()), (3, 3));
    let target = mine[0] as u16;

    // not a client, another client's index, an index out of range
    let stranger = env.keypair();
    let ix = run.evidence(&stranger.pubkey(), i0, step, target);
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.evidence(&v0.pubkey(), i1, step, target);
    env.expect_err(&[&v0], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.evidence(&v0.pubkey(), 8, step, target);
    env.expect_err(&[&v0], &[ix], pe(PE::InvalidClientIndex), &watch);
    // a later step, the step before the epoch's first round
    for bad in [step + 1, step - 1, u32::MAX] {
        let ix = run.evidence(&v0.pubkey(), i0, bad, target);
        env.expect_err(&[&v0], &[ix], pe(PE::InvalidEvidence), &watch);
    }
    // a trainer is no verifier
    let ix = run.evidence(&t0.pubkey(), t[0] as u32, step, target);
    env.expect_err(&[&t0], &[ix], pe(PE::NotAVerifier), &watch);
    // a target out of range, a verifier (no batch)
    let ix = run.evidence(&v0.pubkey(), i0, step, 8);
    env.expect_err(&[&v0], &[ix], pe(PE::InvalidClientIndex), &watch);
    let ix = run.evidence(&v0.pubkey(), i0, step, v[1] as u16);
    env.expect_err(&[&v0], &[ix], pe(PE::InvalidEvidence), &watch);
    let ix = unsigned(run.evidence(&v0.pubkey(), i0, step, target), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);

    // accepted below the quorum; the same verifier again is AlreadyAccused
    env.ok(&[&v0], &[run.evidence(&v0.pubkey(), i0, step, target)]);
    let s = env.state(&live.r.account_key());
    let c = s.get().clients()[target as usize];
    assert_eq!(c.state, ClientState::Healthy as u8);
    assert_eq!(c.accusers[v[0] / 8], 1 << (v[0] % 8));
    let ix = run.evidence(&v0.pubkey(), i0, step, target);
    env.expect_err(&[&v0], &[ix], pe(PE::AlreadyAccused), &watch);

    // the other verifier may name only trainers of its own sample
    let ix = run.evidence(&v1.pubkey(), i1, step, target);
    env.expect_err(&[&v1], &[ix], pe(PE::InvalidEvidence), &watch);
    env.ok(
        &[&v1],
        &[run.evidence(&v1.pubkey(), i1, step, theirs[0] as u16)],
    );
    let s = env.state(&live.r.account_key());
    let accused = s.get().current_round().accused;
    for i in 0..8 {
        let expected = i == target as usize || i == theirs[0];
        assert_eq!((accused[i / 8] >> (i % 8)) & 1 == 1, expected, "client {i}");
    }

    // outside a round
    let mut config = test_config(2);
    config.verification_percent = 50;
    let warm = env.warmup("ev-warm", 2, config);
    let k = warm.client(0).insecure_clone();
    let ix = warm.r.run.evidence(&k.pubkey(), 0, 1, 1);
    env.expect_err(&[&k], &[ix], pe(PE::InvalidRunState), &warm.r.keys());
    assert_eq!(env.run_state(&warm.r), RunState::Warmup);
}
