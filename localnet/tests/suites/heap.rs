//! Heap use of every instruction, measured natively through the runtime: a realistic flow
//! (a permissioned run with the longest run id, four clients, two rounds with 356-byte blooms,
//! a 256-target health check, 64-byte checkpoint strings, then pause and free) with the
//! program's allocations replayed into a model of the 32 KiB SBF bump heap (see
//! `support/sbf_heap.rs` for what is counted and why). Every instruction must fit.
//!
//! `cargo test -p psyche-localnet --test localnet suites::heap -- --nocapture` prints the
//! table.

use std::collections::BTreeMap;

use psyche_coordinator::{
    CheckpointKindParam, CheckpointParams, RunConfigParams, AUTHORIZATION_SEED, CONTRIBUTOR_SEED,
    COORDINATOR_SEED,
};
use psyche_coordinator_core::{batch_mask, RunConfig, RunState, BLOOM_BYTES};
use psyche_localnet::ix::authorization_key;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::sbf_heap::{self, pda_search_bytes, take_last, HEAP, USABLE};
use crate::support::*;

// ------------------------------------------------------------------------------ the flow

fn counting_env() -> Env {
    let mut env = Env::new();
    sbf_heap::install(&mut env);
    env
}

#[derive(Default)]
struct Row {
    count: usize,
    failed: usize,
    data_len: usize,
    accounts: usize,
    allocs: usize,
    used: usize,
    host_only: usize,
}

struct Meter {
    env: Env,
    rows: BTreeMap<String, Row>,
    order: Vec<String>,
}

impl Meter {
    /// Sends, takes the measurement of the program's instruction (the last one) and keeps the
    /// largest per name. `expect_ok`: whether it must succeed.
    fn send(
        &mut self,
        name: &str,
        signers: &[&Keypair],
        ixs: &[Instruction],
        expect_ok: bool,
        host_only: usize,
    ) {
        let r = self.env.send(signers, ixs);
        assert_eq!(r.is_ok(), expect_ok, "{name}: {r:?}");
        let m = take_last().expect("the program ran");
        let ix = ixs.last().unwrap();
        if !self.rows.contains_key(name) {
            self.order.push(name.to_string());
        }
        let row = self.rows.entry(name.to_string()).or_default();
        row.count += 1;
        row.failed += r.is_err() as usize;
        if m.used >= row.used {
            row.used = m.used;
            row.allocs = m.allocs;
            row.data_len = ix.data.len();
            row.accounts = ix.accounts.len();
            row.host_only = host_only;
        }
    }
}

#[test]
fn heap_per_instruction_fits_the_sbf_heap() {
    // allocate stdout's and the test harness's output buffers before measuring
    println!("heap measurement: warming up output buffers");
    let mut m = Meter {
        env: counting_env(),
        rows: BTreeMap::new(),
        order: vec![],
    };
    let quiet = QuietStdout::new();

    // a permissioned run with the longest run id, 4 clients, 2 witnesses, anyone checkpoints
    let id = "psyche-heap-measurement-run-0032";
    assert_eq!(id.len(), 32);
    let config = RunConfig {
        checkpointer_percent: 0,
        ..test_config(4)
    };
    let account = Keypair::new();
    let authority = m.env.keypair();
    let join_authority = m.env.keypair();
    let payer = m.env.payer.pubkey();
    let ixs = create_run_ixs(
        &m.env,
        &account.pubkey(),
        id,
        authority.pubkey(),
        join_authority.pubkey(),
        false,
        &config,
    );
    let pda = pda_search_bytes(&[COORDINATOR_SEED, id.as_bytes()]);
    m.send("init_coordinator", &[&account], &ixs, true, pda);
    let run = psyche_localnet::ix::Run::new(id, account.pubkey());
    let r = TestRun {
        id: id.into(),
        run,
        account,
        authority: authority.insecure_clone(),
        join_authority: join_authority.insecure_clone(),
        config,
    };

    let repo = "r".repeat(64);
    let revision = "v".repeat(64);
    let ck = CheckpointParams {
        kind: CheckpointKindParam::Hub,
        repo: repo.clone(),
        revision: revision.clone(),
        hash: [0; 32],
        step: 0,
    };
    let cfg = Some(RunConfigParams::from_core(&config));
    m.send(
        "update (config + checkpoint)",
        &[&authority],
        &[run.update(&authority.pubkey(), cfg, Some(ck))],
        true,
        0,
    );

    let clients: Vec<Keypair> = (0..4).map(|_| m.env.keypair()).collect();
    let mut auths = vec![];
    for c in &clients {
        let grantee = c.pubkey();
        let seeds: [&[u8]; 3] = [AUTHORIZATION_SEED, run.instance.as_ref(), grantee.as_ref()];
        let pda = pda_search_bytes(&seeds);
        m.send(
            "authorize_joiner",
            &[&join_authority],
            &[run.authorize_joiner(&payer, &join_authority.pubkey(), c.pubkey())],
            true,
            pda,
        );
        auths.push(authorization_key(&run.instance, &c.pubkey()));
    }
    m.send(
        "set_paused (resume)",
        &[&authority],
        &[run.set_paused(&authority.pubkey(), false)],
        true,
        0,
    );
    for (c, a) in clients.iter().zip(&auths) {
        m.send(
            "join_run (authorization)",
            &[c],
            &[run.join_run(&c.pubkey(), Some(*a), p2p_of(c))],
            true,
            0,
        );
    }
    m.send(
        "join_run twice (AlreadyJoined)",
        &[&clients[0]],
        &[run.join_run(&clients[0].pubkey(), Some(auths[0]), p2p_of(&clients[0]))],
        false,
        0,
    );
    m.env
        .advance(config.waiting_for_members_extra_time as i64 + 1);
    m.send("tick", &[], &[run.tick(&payer)], true, 0);
    assert_eq!(m.env.run_state(&r), RunState::Warmup);
    for (i, c) in clients.iter().enumerate() {
        m.send(
            "warmup_witness",
            &[c],
            &[run.warmup_witness(&c.pubkey(), i as u32)],
            true,
            0,
        );
    }
    assert_eq!(m.env.run_state(&r), RunState::RoundTrain);

    // two rounds: every witness vouches for everyone in round 0, nobody vouches for client
    // `x` in round 1, so at round 2 `x` (which had a batch in round 0) can be health-checked
    let keys: Vec<Pubkey> = clients.iter().map(|c| c.pubkey()).collect();
    let x = 3usize;
    for round in 0..2 {
        let s = m.env.state(&r.account_key());
        let step = s.get().header.step;
        let vouched: Vec<Pubkey> = keys
            .iter()
            .enumerate()
            .filter(|(i, _)| round == 0 || *i != x)
            .map(|(_, k)| *k)
            .collect();
        let participant = bloom_of(&vouched).to_vec();
        let broadcast = bloom_of(&keys[..2]).to_vec();
        assert_eq!(participant.len(), BLOOM_BYTES);
        let witnesses = elected_witnesses(s.get());
        if round == 0 {
            let n = non_witnesses(s.get())[0];
            m.send(
                "witness by a non-witness (NotAWitness)",
                &[&clients[n]],
                &[witness_with_blooms(
                    &run,
                    &keys,
                    n,
                    step,
                    &participant,
                    &broadcast,
                )],
                false,
                0,
            );
        }
        for w in witnesses {
            m.send(
                "witness (2 x 356-byte blooms)",
                &[&clients[w]],
                &[witness_with_blooms(
                    &run,
                    &keys,
                    w,
                    step,
                    &participant,
                    &broadcast,
                )],
                true,
                0,
            );
        }
        assert_eq!(m.env.run_state(&r), RunState::RoundWitness);
        if round == 0 {
            // fixed-size arguments; the run elects no verifiers (verification_percent 0)
            m.send(
                "evidence by a non-verifier (NotAVerifier)",
                &[&clients[0]],
                &[run.evidence(&keys[0], 0, step, 1)],
                false,
                0,
            );
        }
        m.env.advance(config.round_witness_time as i64 + 1);
        m.send("tick", &[], &[run.tick(&payer)], true, 0);
        assert_eq!(m.env.run_state(&r), RunState::RoundTrain);
    }
    let s = m.env.state(&r.account_key());
    assert_eq!(s.get().current_round().height, 2);
    let trained = s.get().round_back(2).unwrap();
    assert!(
        s.get().round_trains(trained)
            && (batch_mask(&s.get().config, trained)[x / 8] >> (x % 8)) & 1 == 1,
        "client x had a batch two rounds back"
    );
    let y = 0usize;
    m.send(
        "health_check (256 targets)",
        &[&clients[y]],
        &[run.health_check(&keys[y], y as u32, vec![x as u16; 256])],
        true,
        0,
    );
    let s = m.env.state(&r.account_key());
    assert_eq!(s.get().clients()[x].state, 1, "client x dropped");
    let (agreed_step, agreed_hash) = (s.get().param_step, s.get().param_hash);
    assert_ne!(agreed_step, 0, "the witnesses agreed on the parameters");
    m.send(
        "checkpoint (64-byte repo and revision)",
        &[&clients[y]],
        &[run.checkpoint(
            &keys[y],
            y as u32,
            &repo,
            &revision,
            agreed_step,
            agreed_hash,
        )],
        true,
        0,
    );
    // client y lags (back to Syncing), then reports the agreed parameters (WarmingUp)
    m.send(
        "resync",
        &[&clients[y]],
        &[run.resync(&keys[y], y as u32)],
        true,
        0,
    );
    m.send(
        "synced",
        &[&clients[y]],
        &[run.synced(&keys[y], y as u32, agreed_step, agreed_hash)],
        true,
        0,
    );
    m.send(
        "withdraw",
        &[&clients[1]],
        &[run.withdraw(&keys[1])],
        true,
        0,
    );
    m.send(
        "revoke_joiner",
        &[&join_authority],
        &[run.revoke_joiner(&join_authority.pubkey(), &payer, &keys[1])],
        true,
        0,
    );
    m.send(
        "set_paused (pause)",
        &[&authority],
        &[run.set_paused(&authority.pubkey(), true)],
        true,
        0,
    );
    // the pause takes effect after the epoch: tick it out
    for _ in 0..50 {
        if m.env.run_state(&r) == RunState::Paused {
            break;
        }
        m.env.advance(40);
        m.send("tick", &[], &[run.tick(&payer)], true, 0);
    }
    assert_eq!(m.env.run_state(&r), RunState::Paused);
    // points: 8 delegates (an existing contributor account, a new one), then every slot
    // holding points settled into its contributor account
    let eight: Vec<Pubkey> = (0..8).map(|_| Pubkey::new_unique()).collect();
    m.send(
        "set_delegates (8)",
        &[&clients[0]],
        &[run.set_delegates(&payer, &keys[0], eight.clone())],
        true,
        0,
    );
    let newcomer = m.env.keypair();
    let nk = newcomer.pubkey();
    let pda = pda_search_bytes(&[CONTRIBUTOR_SEED, run.instance.as_ref(), nk.as_ref()]);
    m.send(
        "set_delegates (8, new account)",
        &[&newcomer],
        &[run.set_delegates(&payer, &nk, eight)],
        true,
        pda,
    );
    let s = m.env.state(&r.account_key());
    let unsettled: Vec<usize> = (0..s.get().clients().len())
        .filter(|&i| s.get().clients()[i].unsettled())
        .collect();
    assert!(!unsettled.is_empty());
    for i in unsettled {
        m.send(
            "settle_points",
            &[],
            &[run.settle_points(&payer, i as u32, &keys[i])],
            true,
            0,
        );
    }
    m.send(
        "tick while halted (Halted)",
        &[],
        &[run.tick(&payer)],
        false,
        0,
    );
    m.send(
        "free_coordinator",
        &[&authority],
        &[run.free_coordinator(&authority.pubkey(), &payer)],
        true,
        0,
    );
    drop(quiet);

    // the table
    println!();
    println!(
        "heap allocated inside the program per instruction (largest of `count`; SBF bump heap {HEAP} B, {USABLE} B usable)"
    );
    println!(
        "{:<40} {:>5} {:>5} {:>4} {:>6} {:>8} {:>9} {:>8} {:>6}",
        "instruction",
        "count",
        "data",
        "accs",
        "allocs",
        "measured",
        "host-only",
        "SBF est.",
        "% heap"
    );
    for name in &m.order {
        let row = &m.rows[name];
        let est = row.used - row.host_only.min(row.used);
        println!(
            "{:<40} {:>5} {:>5} {:>4} {:>6} {:>8} {:>9} {:>8} {:>5.1}%",
            name,
            row.count,
            row.data_len,
            row.accounts,
            row.allocs,
            row.used,
            row.host_only,
            est,
            100.0 * est as f64 / HEAP as f64
        );
    }
    assert!(
        !sbf_heap::overflowed(),
        "more live allocations than tracked"
    );
    for (name, row) in &m.rows {
        assert!(row.used > 0, "{name}: nothing measured");
        assert!(
            row.used < USABLE,
            "{name}: {} bytes do not fit the {HEAP}-byte SBF heap",
            row.used
        );
    }
    // every instruction of the program was measured
    for kind in INSTRUCTIONS {
        assert!(
            m.rows.keys().any(|k| k.split(' ').next() == Some(kind)),
            "{kind} not measured"
        );
    }
}

/// Arguments whose borsh length prefix claims more bytes than the instruction carries.
/// Natively they fail to deserialize (Anchor's `InstructionDidNotDeserialize`, 102), as they
/// should. On SBF they would not get that far: borsh 0.10 (Anchor 0.31's) decodes a `Vec<u8>`
/// or `String` by first allocating `min(len, 1 MiB)` zero bytes (`u8::vec_from_reader`), so a
/// prefix above ~31 KiB exhausts the 32 KiB bump heap and the program aborts (out of memory:
/// `ProgramFailedToComplete`) instead of returning the named error. Ignored: it fails until
/// the arguments are decoded without that up-front allocation (a program change, reported).
/// `cargo test -p psyche-localnet --test localnet suites::heap -- --ignored --nocapture`
/// reproduces it.
#[test]
#[ignore = "fails: borsh 0.10 preallocates min(len, 1 MiB) for Vec<u8>/String arguments"]
fn oversized_length_prefixes_fit_the_sbf_heap() {
    println!("heap measurement: warming up output buffers");
    let mut env = counting_env();
    let quiet = QuietStdout::new();
    let live = env.round_train("prefix", 2, test_config(2));
    let c = live.client(0).insecure_clone();
    let auth = live.r.authority.insecure_clone();
    let run = live.r.run;
    let claim = 0x0001_0000u32; // 64 KiB claimed, a few hundred bytes present
    let patch = |mut ix: Instruction, at: usize| {
        ix.data[at..at + 4].copy_from_slice(&claim.to_le_bytes());
        ix
    };
    let mut cases: Vec<(&str, Instruction, &Keypair)> = vec![
        // discriminator 8, index 4, step 4, then the participant bloom's prefix
        (
            "witness participant_bloom",
            patch(live.witness_ix(0, 1), 16),
            &c,
        ),
        // discriminator 8, index 4, then the repo's prefix
        (
            "checkpoint repo",
            patch(
                run.checkpoint(&c.pubkey(), 0, "org/model", "main", 1, [7; 32]),
                12,
            ),
            &c,
        ),
        // discriminator 8, Option tag 1 (None), Option tag 1 (Some), kind 1, repo prefix
        (
            "update checkpoint repo",
            patch(
                run.update(
                    &auth.pubkey(),
                    None,
                    Some(CheckpointParams {
                        kind: CheckpointKindParam::Hub,
                        repo: "org/model".into(),
                        revision: String::new(),
                        hash: [0; 32],
                        step: 0,
                    }),
                ),
                11,
            ),
            &auth,
        ),
    ];
    // `init_coordinator`'s run id: the first argument
    let blank = Keypair::new();
    let ixs = create_run_ixs(
        &env,
        &blank.pubkey(),
        "prefix-init",
        auth.pubkey(),
        auth.pubkey(),
        true,
        &test_config(2),
    );
    let payer = env.payer.insecure_clone();
    cases.push(("init_coordinator run_id", patch(ixs[1].clone(), 8), &payer));
    let mut over = vec![];
    for (name, ix, signer) in cases {
        let r = env.send(&[signer], &[ix]);
        let m = take_last().expect("the program ran");
        assert_eq!(
            r,
            Err(anchor(
                anchor_lang::error::ErrorCode::InstructionDidNotDeserialize
            )),
            "{name}"
        );
        if m.used >= USABLE {
            over.push(format!("{name}: {} bytes", m.used));
        }
    }
    drop(quiet);
    assert!(
        over.is_empty(),
        "would exhaust the {HEAP}-byte SBF heap: {over:#?}"
    );
}
