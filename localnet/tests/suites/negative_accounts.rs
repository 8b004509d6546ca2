//! Accounts of another run, of the wrong type, owner or mutability, and a clock before 1970.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_coordinator_core::BLOOM_BYTES;
use psyche_localnet::ix::Run;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::*;

/// Every instruction that touches the state, with run A's instance and the coordinator
/// account of run B (and the other way round): `WrongCoordinatorAccount`. Then accounts of
/// the wrong type, owner or mutability: Anchor's account errors.
#[test]
fn accounts_of_another_run_are_refused() {
    let mut env = Env::new();
    let a = env.round_train("run-a", 2, test_config(2));
    let b = env.round_train("run-b", 2, test_config(2));
    let watch = [
        a.r.instance(),
        a.r.account_key(),
        b.r.instance(),
        b.r.account_key(),
    ];
    let spill = Pubkey::new_unique();

    // instructions of run `x` (signed by x's authority or client 0), with `account` swapped in
    let build = |x: &Live, instance: Pubkey, account: Pubkey| -> Vec<(Instruction, Keypair)> {
        let run = Run { instance, account };
        let auth = x.r.authority.insecure_clone();
        let c = x.client(0).insecure_clone();
        let ck = c.pubkey();
        let au = auth.pubkey();
        vec![
            (run.update(&au, None, None), auth.insecure_clone()),
            (run.set_paused(&au, true), auth.insecure_clone()),
            (run.free_coordinator(&au, &spill), auth.insecure_clone()),
            (run.join_run(&ck, None, [1; 32]), c.insecure_clone()),
            (run.tick(&ck), c.insecure_clone()),
            (
                run.witness(
                    &ck,
                    0,
                    1,
                    vec![0; BLOOM_BYTES],
                    vec![0; BLOOM_BYTES],
                    [0; 32],
                    [0; 32],
                ),
                c.insecure_clone(),
            ),
            (run.warmup_witness(&ck, 0), c.insecure_clone()),
            (run.health_check(&ck, 0, vec![1]), c.insecure_clone()),
            (
                run.checkpoint(&ck, 0, "org/model", "main", 1, [7; 32]),
                c.insecure_clone(),
            ),
            (run.withdraw(&ck), c.insecure_clone()),
            (run.synced(&ck, 0, 1, [7; 32]), c.insecure_clone()),
            (run.resync(&ck, 0), c.insecure_clone()),
        ]
    };
    let mut cases = build(&a, a.r.instance(), b.r.account_key());
    cases.extend(build(&b, b.r.instance(), a.r.account_key()));
    assert_eq!(cases.len(), 24);
    for (ix, signer) in &cases {
        env.expect_err(
            &[signer],
            std::slice::from_ref(ix),
            pe(PE::WrongCoordinatorAccount),
            &watch,
        );
    }

    // an instance in place of the coordinator account, and the other way round: Anchor's
    // discriminator check
    let c0 = a.client(0).insecure_clone();
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[2].pubkey = a.r.instance();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::AccountDiscriminatorMismatch),
        &watch,
    );
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[1].pubkey = a.r.account_key();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::AccountDiscriminatorMismatch),
        &watch,
    );
    // an instance owned by another program (a wallet), one that does not exist
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[1].pubkey = env.payer.pubkey();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::AccountOwnedByWrongProgram),
        &watch,
    );
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[1].pubkey = Pubkey::new_unique();
    env.expect_err(&[&c0], &[ix], anchor(AE::AccountNotInitialized), &watch);
    // a coordinator account passed read-only
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts[2].is_writable = false;
    env.expect_err(&[&c0], &[ix], anchor(AE::ConstraintMut), &watch);
    // too few accounts, no instruction data, an unknown discriminator
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.accounts.truncate(2);
    env.expect_err(&[&c0], &[ix], anchor(AE::AccountNotEnoughKeys), &watch);
    // (Anchor 0.31 matches discriminators by prefix: empty data is no known instruction)
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.data.clear();
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::InstructionFallbackNotFound),
        &watch,
    );
    let mut ix = a.r.run.tick(&c0.pubkey());
    ix.data = vec![1, 2, 3, 4, 5, 6, 7, 8];
    env.expect_err(
        &[&c0],
        &[ix],
        anchor(AE::InstructionFallbackNotFound),
        &watch,
    );
    // the state still works
    env.tick(&a.r);
}

#[test]
fn negative_clock_is_an_invalid_operation() {
    let mut env = Env::new();
    let r = env.create_run("clock", true, test_config(2));
    env.set_time(-1);
    let auth = r.authority.insecure_clone();
    let ix = r.run.set_paused(&auth.pubkey(), false);
    env.expect_err(&[&auth], &[ix], pe(PE::InvalidOperation), &r.keys());
    let payer = env.payer.pubkey();
    env.expect_err(
        &[],
        &[r.run.tick(&payer)],
        pe(PE::InvalidOperation),
        &r.keys(),
    );
    // the epoch itself is a valid time
    env.set_time(0);
    env.resume(&r);
}

/// An account another version of the program made: every instruction over the state stops
/// with `LayoutVersionMismatch` before reading a field (also `free_coordinator`, which reads
/// the run state without the core), whatever the account's size.
#[test]
fn an_account_of_another_layout_version_is_refused_by_name() {
    let mut env = Env::new();
    let live = env.round_train("layout", 2, test_config(2));
    let watch = live.r.keys();
    let (run, key) = (live.r.run, live.r.account_key());
    let auth = live.r.authority.insecure_clone();
    let c = live.client(0).insecure_clone();
    let (au, ck) = (auth.pubkey(), c.pubkey());
    let spill = Pubkey::new_unique();
    let cases: Vec<(Instruction, &Keypair)> = vec![
        (run.update(&au, None, None), &auth),
        (run.set_paused(&au, true), &auth),
        (run.set_paused(&au, false), &auth),
        (run.free_coordinator(&au, &spill), &auth),
        (run.join_run(&ck, None, [1; 32]), &c),
        (run.tick(&ck), &c),
        (live.witness_ix(0, 1), &c),
        (run.warmup_witness(&ck, 0), &c),
        (run.health_check(&ck, 0, vec![1]), &c),
        (run.checkpoint(&ck, 0, "org/model", "", 1, params_at(1)), &c),
        (run.withdraw(&ck), &c),
        (run.synced(&ck, 0, 1, params_at(1)), &c),
        (run.resync(&ck, 0), &c),
        (run.evidence(&ck, 0, 1, 1), &c),
    ];
    let current = env.account(&key).unwrap();
    let at = 8 + psyche_coordinator_core::VERSION_OFFSET;
    // version 1 (zero padding there) at this size and at its own, version 2 (no client
    // phases), version 3 (no points), version 4 (no accusers), version 5 (no accused masks),
    // version 6 (no spec hash), version 7 (no client bloom bits, 8,192 bytes shorter) and a
    // version from the future
    let mut versions = Vec::new();
    for (version, len) in [
        (0u32, current.data.len()),
        (0, 8 + 133_640),
        (2, 8 + 137_856),
        (3, 8 + 137_984),
        (4, 8 + 162_592),
        (5, 8 + 178_976),
        (6, 8 + 179_104),
        (7, 8 + 179_136),
        (9, current.data.len()),
    ] {
        let mut other = current.clone();
        other.data.truncate(len);
        other.data[at..at + 4].copy_from_slice(&version.to_le_bytes());
        versions.push(other);
    }
    for other in versions {
        env.chain.svm.set_account(key, other).unwrap();
        for (ix, signer) in &cases {
            env.expect_err(
                &[signer],
                std::slice::from_ref(ix),
                pe(PE::LayoutVersionMismatch),
                &watch,
            );
        }
    }
    // the account of this version works again
    env.chain.svm.set_account(key, current).unwrap();
    env.tick(&live.r);
}
