//! `checkpoint`: elected checkpointers only, with a valid repo and revision, recording only the
//! (step, parameter hash) the witnesses agreed on.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::{committee, RunConfig, RunState};
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

#[test]
fn checkpoint_refusals() {
    let mut env = Env::new();
    let config = RunConfig {
        checkpointer_percent: 50,
        ..test_config(4)
    };
    // Warmup of a run with elected checkpointers: no round to elect them from
    let warm = env.warmup("ck", 4, config);
    let run = warm.r.run;
    let watch = warm.r.keys();
    let c0 = warm.client(0).insecure_clone();
    let ix = run.checkpoint(&c0.pubkey(), 0, "org/model", "main", 1, params_at(1));
    env.expect_err(&[&c0], &[ix], pe(PE::NotACheckpointer), &watch);

    env.warmup_done(&warm);
    let s = env.state(&warm.r.account_key());
    let (yes, no): (Vec<usize>, Vec<usize>) =
        (0..4).partition(|&i| committee::is_checkpointer(s.get().current_round(), 50, i));
    assert_eq!(yes.len(), 2, "ceil(4 * 50%) checkpointers");
    let nk = warm.client(no[0]).insecure_clone();
    let ix = run.checkpoint(
        &nk.pubkey(),
        no[0] as u32,
        "org/model",
        "main",
        1,
        params_at(1),
    );
    env.expect_err(&[&nk], &[ix], pe(PE::NotACheckpointer), &watch);
    // not a client, wrong index
    let stranger = env.keypair();
    let ix = run.checkpoint(&stranger.pubkey(), 0, "org/model", "main", 1, params_at(1));
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.checkpoint(&nk.pubkey(), 9, "org/model", "main", 1, params_at(1));
    env.expect_err(&[&nk], &[ix], pe(PE::InvalidClientIndex), &watch);
    // an elected checkpointer with a bad checkpoint
    let y = yes[0];
    let yk = warm.client(y).insecure_clone();
    let long = "m".repeat(65);
    for (repo, rev) in [
        ("", "main"),
        (long.as_str(), "main"),
        ("org/model", long.as_str()),
        ("org\0model", "main"),
        ("org/model", "ma\0in"),
    ] {
        let ix = run.checkpoint(&yk.pubkey(), y as u32, repo, rev, 1, params_at(1));
        env.expect_err(&[&yk], &[ix], pe(PE::InvalidCheckpoint), &watch);
    }
    // nothing agreed yet: no pair can be recorded, a zero one neither
    let ix = run.checkpoint(&yk.pubkey(), y as u32, "org/model", "", 1, params_at(1));
    env.expect_err(&[&yk], &[ix], pe(PE::CheckpointHashMismatch), &watch);
    let ix = run.checkpoint(&yk.pubkey(), y as u32, "org/model", "", 0, [0; 32]);
    env.expect_err(&[&yk], &[ix], pe(PE::CheckpointHashMismatch), &watch);
    let ix = unsigned(
        run.checkpoint(&yk.pubkey(), y as u32, "org/model", "main", 1, params_at(1)),
        0,
    );
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // halted: pausing in RoundTrain only takes effect after the epoch; a paused run refuses
    let halted = env.warmup("ck-halted", 2, test_config(2));
    env.pause(&halted.r);
    let k = halted.client(0).insecure_clone();
    let ix = halted
        .r
        .run
        .checkpoint(&k.pubkey(), 0, "org/model", "main", 1, params_at(1));
    env.expect_err(&[&k], &[ix], pe(PE::Halted), &halted.r.keys());
}

#[test]
fn checkpoint_records_only_the_agreed_pair() {
    let mut env = Env::new();
    let live = env.round_train("ck-agreed", 3, test_config(3));
    let watch = live.r.keys();
    let run = live.r.run;
    env.complete_round(&live);
    let s = env.state(&live.r.account_key());
    let (step, hash) = (s.get().param_step, s.get().param_hash);
    assert_eq!(
        (step, hash),
        (1, params_at(1)),
        "the witnesses of step 1 agreed"
    );
    let k = live.client(0).insecure_clone();
    // another hash, another step, the hash of a step nobody agreed on
    for (st, h) in [
        (step, [0xee; 32]),
        (step + 1, hash),
        (step + 1, params_at(step + 1)),
    ] {
        let ix = run.checkpoint(&k.pubkey(), 0, "store/x", "", st, h);
        env.expect_err(&[&k], &[ix], pe(PE::CheckpointHashMismatch), &watch);
    }
    // the agreed pair is recorded (the run stays in RoundTrain: not a Cooldown snapshot)
    env.ok(&[&k], &[live.checkpoint_ix(s.get(), 0, "store/step-1")]);
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().repo(), b"store/step-1");
    assert_eq!(
        (s.get().checkpoint_step, s.get().checkpoint_hash),
        (step, hash)
    );
    assert_eq!(s.get().run_state(), RunState::RoundTrain);
}

#[test]
fn a_cooldown_snapshot_of_the_final_parameters_ends_the_cooldown() {
    let mut env = Env::new();
    let config = RunConfig {
        cooldown_time: 60,
        ..test_config(3)
    };
    let live = env.round_train("ck-cooldown", 3, config);
    let pause = live.r.authority.insecure_clone();
    env.ok(&[&pause], &[live.r.run.set_paused(&pause.pubkey(), true)]);
    while env.run_state(&live.r) == RunState::RoundTrain {
        env.complete_round(&live);
    }
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().run_state(), RunState::Cooldown);
    let epoch = s.get().header.epoch;
    let k = live.client(0).insecure_clone();
    env.ok(&[&k], &[live.checkpoint_ix(s.get(), 0, "store/final")]);
    // a pending pause: the ended epoch pauses at once instead of waiting out the 60 s
    let s = env.state(&live.r.account_key());
    assert_eq!(s.get().run_state(), RunState::Paused);
    assert_eq!(s.get().header.epoch, epoch + 1);
    assert_eq!(s.get().repo(), b"store/final");
}
