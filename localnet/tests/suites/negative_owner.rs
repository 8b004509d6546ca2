//! The main authority's instructions, `update`, `set_paused` and `set_run_spec`: who may send
//! them, and when.

use anchor_lang::error::ErrorCode as AE;
use anchor_lang::Discriminator;
use psyche_coordinator::{
    CheckpointKindParam, CheckpointParams, CoordinatorProgramError as PE, RunConfigParams, RunSpec,
};
use psyche_coordinator_core::RunConfig;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

#[test]
fn update_refusals() {
    let mut env = Env::new();
    let config = test_config(2);
    let r = env.create_run("upd", true, config);
    let watch = r.keys();
    let stranger = env.keypair();
    let cfg = Some(RunConfigParams::from_core(&config));

    // not the main authority: a stranger, the join authority
    for signer in [&stranger, &r.join_authority] {
        let ix = r.run.update(&signer.pubkey(), cfg, None);
        env.expect_err(&[signer], &[ix], pe(PE::NotAuthority), &watch);
    }
    // the authority, halted run: the core's argument checks
    let auth = r.authority.insecure_clone();
    let bad = RunConfigParams::from_core(&RunConfig {
        cooldown_time: 0,
        ..config
    });
    let ix = r.run.update(&auth.pubkey(), Some(bad), None);
    env.expect_err(&[&auth], &[ix], pe(PE::InvalidConfig), &watch);
    let long = "r".repeat(65);
    for ck in [
        hub("", "main"),
        hub(&long, ""),
        hub("org/model", &long),
        hub("org\0model", ""),
    ] {
        let ix = r.run.update(&auth.pubkey(), None, Some(ck));
        env.expect_err(&[&auth], &[ix], pe(PE::InvalidCheckpoint), &watch);
    }
    // a Stored checkpoint without its parameter hash
    let stored = CheckpointParams {
        kind: CheckpointKindParam::Stored,
        ..hub("store/x", "")
    };
    let ix = r.run.update(&auth.pubkey(), None, Some(stored));
    env.expect_err(&[&auth], &[ix], pe(PE::InvalidCheckpoint), &watch);
    // a valid config with an invalid checkpoint writes neither
    let ix = r.run.update(&auth.pubkey(), cfg, Some(hub("", "")));
    env.expect_err(&[&auth], &[ix], pe(PE::InvalidCheckpoint), &watch);
    // an unknown checkpoint kind does not deserialize
    let mut ix = r
        .run
        .update(&auth.pubkey(), None, Some(hub("org/model", "")));
    // ... kind (1), repo (4 + 9 bytes), revision (4 + 0 bytes), hash (32), step (4), then
    // spec_hash None (1)
    let kind_at = ix.data.len() - 1 - (4 + 9) - 4 - 32 - 4 - 1;
    assert_eq!(ix.data[kind_at], CheckpointKindParam::Hub as u8);
    ix.data[kind_at] = 4;
    env.expect_err(
        &[&auth],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &watch,
    );

    // a running run
    env.resume(&r);
    let ix = r.run.update(&auth.pubkey(), cfg, None);
    env.expect_err(&[&auth], &[ix], pe(PE::UpdateNotHalted), &watch);
    // the authority not signing
    let ix = unsigned(r.run.update(&auth.pubkey(), cfg, None), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);

    // a finished run
    let live = finished_run(&mut env, "upd-done");
    let a = live.r.authority.insecure_clone();
    let ix = live.r.run.update(&a.pubkey(), cfg, None);
    env.expect_err(&[&a], &[ix], pe(PE::RunFinished), &live.r.keys());
}

#[test]
fn set_paused_refusals() {
    let mut env = Env::new();
    let r = env.create_run("pause", true, test_config(2));
    let watch = r.keys();
    let stranger = env.keypair();
    let auth = r.authority.insecure_clone();
    for signer in [&stranger, &r.join_authority] {
        for paused in [false, true] {
            let ix = r.run.set_paused(&signer.pubkey(), paused);
            env.expect_err(&[signer], &[ix], pe(PE::NotAuthority), &watch);
        }
    }
    // Uninitialized: pausing is refused (halted)
    let ix = r.run.set_paused(&auth.pubkey(), true);
    env.expect_err(&[&auth], &[ix], pe(PE::Halted), &watch);
    let ix = unsigned(r.run.set_paused(&auth.pubkey(), false), 0);
    env.expect_err(&[], &[ix], anchor(AE::AccountNotSigner), &watch);
    // a bool that is neither 0 nor 1 does not deserialize
    let mut ix = r.run.set_paused(&auth.pubkey(), false);
    ix.data[8] = 2;
    env.expect_err(
        &[&auth],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &watch,
    );
    env.resume(&r);
    let ix = r.run.set_paused(&auth.pubkey(), false);
    env.expect_err(&[&auth], &[ix], pe(PE::CannotResume), &watch);
    env.pause(&r);
    let ix = r.run.set_paused(&auth.pubkey(), true);
    env.expect_err(&[&auth], &[ix], pe(PE::Halted), &watch);
    // a finished run can be neither resumed nor paused
    let live = finished_run(&mut env, "pause-done");
    let a = live.r.authority.insecure_clone();
    let ix = live.r.run.set_paused(&a.pubkey(), false);
    env.expect_err(&[&a], &[ix], pe(PE::CannotResume), &live.r.keys());
    let ix = live.r.run.set_paused(&a.pubkey(), true);
    env.expect_err(&[&a], &[ix], pe(PE::Halted), &live.r.keys());
}

#[test]
fn the_run_spec_is_written_by_the_main_authority_and_hashed_by_update() {
    let mut env = Env::new();
    let r = env.create_run("spec", true, test_config(2));
    let stranger = env.keypair();
    let auth = r.authority.insecure_clone();
    let spec_key = r.run.run_spec();
    let mut watch = r.keys().to_vec();
    watch.push(spec_key);
    // only the main authority writes it
    for signer in [&stranger, &r.join_authority] {
        let ix = r.run.set_run_spec(&signer.pubkey(), 3, 0, b"abc".to_vec());
        env.expect_err(&[signer], &[ix], pe(PE::NotAuthority), &watch);
    }
    assert!(env.account(&spec_key).is_none());
    // two chunks, out of order; the account is made by the first
    let spec: Vec<u8> = (0..1500u32).map(|i| (i % 251) as u8).collect();
    let ix = r
        .run
        .set_run_spec(&auth.pubkey(), 1500, 800, spec[800..].to_vec());
    env.ok(&[&auth], &[ix]);
    let ix = r
        .run
        .set_run_spec(&auth.pubkey(), 1500, 0, spec[..800].to_vec());
    env.ok(&[&auth], &[ix]);
    let data = env.data(&spec_key);
    assert_eq!(data.len(), RunSpec::SPACE);
    assert_eq!(&data[..8], RunSpec::DISCRIMINATOR);
    // bump, instance, then the bytes (borsh: u32 length first)
    assert_eq!(&data[9..41], r.run.instance.as_ref());
    assert_eq!(&data[41..45], &1500u32.to_le_bytes());
    assert_eq!(&data[45..45 + 1500], &spec[..]);
    // too large, a chunk past the end: nothing changes
    let ix = r.run.set_run_spec(&auth.pubkey(), 8193, 0, vec![1]);
    env.expect_err(&[&auth], &[ix], pe(PE::RunSpecTooLarge), &watch);
    let ix = r.run.set_run_spec(&auth.pubkey(), 1500, 1499, vec![1, 2]);
    env.expect_err(&[&auth], &[ix], pe(PE::RunSpecChunkOutOfRange), &watch);
    // its hash goes into the state with `update`, while the run is halted
    let hash = [7u8; 32];
    let ix = r.run.update_spec(&auth.pubkey(), None, None, Some(hash));
    env.ok(&[&auth], &[ix]);
    assert_eq!(env.state(&r.account_key()).get().spec_hash, hash);
    env.resume(&r);
    let ix = r.run.update_spec(&auth.pubkey(), None, None, Some([8; 32]));
    env.expect_err(&[&auth], &[ix], pe(PE::UpdateNotHalted), &watch);
}
