//! `checkpoint`: elected checkpointers only, with a valid repo and revision.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::{committee, RunConfig};
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
    let ix = run.checkpoint(&c0.pubkey(), 0, "org/model", "main");
    env.expect_err(&[&c0], &[ix], pe(PE::NotACheckpointer), &watch);

    env.warmup_done(&warm);
    let s = env.state(&warm.r.account_key());
    let (yes, no): (Vec<usize>, Vec<usize>) =
        (0..4).partition(|&i| committee::is_checkpointer(s.get().current_round(), 50, i));
    assert_eq!(yes.len(), 2, "ceil(4 * 50%) checkpointers");
    let nk = warm.client(no[0]).insecure_clone();
    let ix = run.checkpoint(&nk.pubkey(), no[0] as u32, "org/model", "main");
    env.expect_err(&[&nk], &[ix], pe(PE::NotACheckpointer), &watch);
    // not a client, wrong index
    let stranger = env.keypair();
    let ix = run.checkpoint(&stranger.pubkey(), 0, "org/model", "main");
    env.expect_err(&[&stranger], &[ix], pe(PE::NotAClient), &watch);
    let ix = run.checkpoint(&nk.pubkey(), 9, "org/model", "main");
    env.expect_err(&[&nk], &[ix], pe(PE::InvalidClientIndex), &watch);
    // an elected checkpointer with a bad checkpoint
    let yk = warm.client(yes[0]).insecure_clone();
    let long = "m".repeat(65);
    for (repo, rev) in [
        ("", "main"),
        (long.as_str(), "main"),
        ("org/model", long.as_str()),
        ("org\0model", "main"),
        ("org/model", "ma\0in"),
    ] {
        let ix = run.checkpoint(&yk.pubkey(), yes[0] as u32, repo, rev);
        env.expect_err(&[&yk], &[ix], pe(PE::InvalidCheckpoint), &watch);
    }
    let ix = unsigned(
        run.checkpoint(&yk.pubkey(), yes[0] as u32, "org/model", "main"),
        0,
    );
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // halted: pausing in RoundTrain only takes effect after the epoch; a paused run refuses
    let halted = env.warmup("ck-halted", 2, test_config(2));
    env.pause(&halted.r);
    let k = halted.client(0).insecure_clone();
    let ix = halted.r.run.checkpoint(&k.pubkey(), 0, "org/model", "main");
    env.expect_err(&[&k], &[ix], pe(PE::Halted), &halted.r.keys());
}
