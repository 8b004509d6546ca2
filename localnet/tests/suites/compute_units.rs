//! Compute units of every instruction of the SBF build (`sbf/psyche_coordinator.so`) under the
//! VM, at 1, 32 and 256 clients: a permissioned run created, configured, joined, warmed up,
//! three rounds (one ended by the round-train timeout), a health check, evidence by an elected
//! verifier, a checkpoint, a client lagging and back, a withdrawal, a pause ticked out, points
//! delegated and settled, and the run freed. Every transaction asks for the most a transaction
//! may have (1.4M units); a transaction's figure is what the runtime metered for it (the
//! compute-budget instruction's 150 units and, for `init_coordinator`, the system program's
//! `create_account` included).
//!
//! A benchmark, not a test of the figures: `python -m benchmarks.compute_units` runs it
//! (`--ignored`) and writes the table. `PSYCHE_COMPUTE_UNITS_JSON=FILE` writes
//! `{clients: {label: {"units": max, "count": n}}}` there.

use std::collections::BTreeMap;

use psyche_coordinator::{CheckpointKindParam, CheckpointParams, RunConfigParams};
use psyche_coordinator_core::{
    assignment::in_verification_sample, committee, RunConfig, RunState, MAX_CLIENTS,
};
use psyche_localnet::ix::{authorization_key, Run};
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::*;

const MAX_COMPUTE_UNITS: u32 = 1_400_000;

/// The most units each label used, and how many times it was sent.
type Table = BTreeMap<String, (u64, usize)>;

struct Meter {
    env: Env,
    table: Table,
    clients: usize,
}

impl Meter {
    /// Sends `ixs` after a budget of [`MAX_COMPUTE_UNITS`]; it must succeed. Notes the
    /// transaction's units under `label`.
    fn send(&mut self, label: &str, signers: &[&Keypair], ixs: &[Instruction]) {
        let units = self.units(label, signers, ixs);
        self.note(label.to_string(), units);
    }

    /// The units the runtime metered for `ixs` (after the budget instruction); panics, naming
    /// `label`, when they fail.
    fn units(&mut self, label: &str, signers: &[&Keypair], ixs: &[Instruction]) -> u64 {
        let mut limit = vec![2u8]; // ComputeBudgetInstruction::SetComputeUnitLimit
        limit.extend_from_slice(&MAX_COMPUTE_UNITS.to_le_bytes());
        let mut all = vec![Instruction {
            program_id: solana_sdk_ids::compute_budget::ID,
            accounts: vec![],
            data: limit,
        }];
        all.extend_from_slice(ixs);
        let payer = self.env.payer.insecure_clone();
        match self.env.send_from(&payer, signers, &all) {
            Ok(meta) => meta.compute_units_consumed,
            Err(f) => panic!(
                "{label} at {} clients: {:?}\n{}",
                self.clients,
                f.err,
                f.meta.logs.join("\n")
            ),
        }
    }

    fn note(&mut self, label: String, units: u64) {
        let row = self.table.entry(label).or_default();
        row.0 = row.0.max(units);
        row.1 += 1;
    }

    /// A tick, labelled by the run state it moved from and to.
    fn tick(&mut self, r: &TestRun) {
        let from = self.env.run_state(r);
        let payer = self.env.payer.pubkey();
        let units = self.units(&format!("tick from {from:?}"), &[], &[r.run.tick(&payer)]);
        let to = self.env.run_state(r);
        let label = if from == to {
            format!("tick ({from:?}, no change)")
        } else {
            format!("tick {from:?} -> {to:?}")
        };
        self.note(label, units);
    }
}

/// A verifier of the current round and a target in its sample, if the round elects any.
fn evidence_pair(s: &psyche_coordinator_core::CoordinatorState) -> Option<(usize, usize)> {
    let rnd = s.current_round();
    let mut out = [0u8; MAX_CLIENTS];
    let v = committee::verifiers(rnd, s.config.verification_percent, &mut out);
    let verifier = *out[..v].first()? as usize;
    (0..s.clients().len())
        .find(|&t| in_verification_sample(&s.config, rnd, verifier, t))
        .map(|t| (verifier, t))
}

fn flow(elf: &[u8], n: usize) -> Table {
    let mut env = Env::seeded(n as u64);
    env.chain
        .load_program_elf(elf)
        .expect("the SBF ELF loads and runs");
    let mut m = Meter {
        env,
        table: Table::new(),
        clients: n,
    };
    let config = RunConfig {
        // every elected role at its default size: up to 32 witnesses, a quarter verifies
        witness_nodes: 0,
        verification_percent: if n >= 4 { 25 } else { 0 },
        checkpointer_percent: 0,
        min_clients: 1,
        global_batch_size_start: (n as u16).max(16),
        global_batch_size_end: (n as u16).max(16),
        ..test_config(n as u16)
    };

    // created permissioned (authorize_joiner), configured, resumed
    let id = format!("compute-units-{n}");
    let account = Keypair::new();
    let authority = m.env.keypair();
    let join_authority = m.env.keypair();
    let payer = m.env.payer.pubkey();
    let ixs = create_run_ixs(
        &m.env,
        &account.pubkey(),
        &id,
        authority.pubkey(),
        join_authority.pubkey(),
        false,
        &config,
    );
    m.send("init_coordinator", &[&account], &ixs);
    let run = Run::new(&id, account.pubkey());
    let r = TestRun {
        id: id.clone(),
        run,
        account,
        authority: authority.insecure_clone(),
        join_authority: join_authority.insecure_clone(),
        config,
    };
    let ck = CheckpointParams {
        kind: CheckpointKindParam::Hub,
        repo: "r".repeat(64),
        revision: "v".repeat(64),
        hash: [0; 32],
        step: 0,
    };
    m.send(
        "update",
        &[&authority],
        &[run.update(
            &authority.pubkey(),
            Some(RunConfigParams::from_core(&config)),
            Some(ck),
        )],
    );
    let clients: Vec<Keypair> = (0..n).map(|_| m.env.keypair()).collect();
    let keys: Vec<Pubkey> = clients.iter().map(|c| c.pubkey()).collect();
    for k in &keys {
        m.send(
            "authorize_joiner",
            &[&join_authority],
            &[run.authorize_joiner(&payer, &join_authority.pubkey(), *k)],
        );
    }
    m.send(
        "set_paused",
        &[&authority],
        &[run.set_paused(&authority.pubkey(), false)],
    );
    for c in &clients {
        let a = authorization_key(&run.instance, &c.pubkey());
        m.send(
            "join_run",
            &[c],
            &[run.join_run(&c.pubkey(), Some(a), p2p_of(c))],
        );
    }
    m.env
        .advance(config.waiting_for_members_extra_time as i64 + 1);
    m.tick(&r);
    assert_eq!(m.env.run_state(&r), RunState::Warmup);
    for (i, c) in clients.iter().enumerate() {
        m.send(
            "warmup_witness",
            &[c],
            &[run.warmup_witness(&c.pubkey(), i as u32)],
        );
    }
    assert_eq!(m.env.run_state(&r), RunState::RoundTrain);

    // round 0: everyone vouched for; round 1: all but client x, so that x (which had a batch
    // in round 0) can be health-checked in round 2; round 2: one witness missing, so the
    // round-train time runs out
    let x = n - 1;
    let mut evidence_sent = false;
    let y = 0usize;
    for round in 0..3 {
        if round == 2 && n >= 2 {
            m.send(
                "health_check",
                &[&clients[y]],
                &[run.health_check(&keys[y], y as u32, vec![x as u16])],
            );
            let s = m.env.state(&r.account_key());
            assert_eq!(s.get().clients()[x].state, 1, "client x dropped");
        }
        let s = m.env.state(&r.account_key());
        let step = s.get().header.step;
        let vouched: Vec<Pubkey> = keys
            .iter()
            .enumerate()
            .filter(|(i, _)| round != 1 || n == 1 || *i != x)
            .map(|(_, k)| *k)
            .collect();
        let participant = bloom_of(&vouched).to_vec();
        let broadcast = bloom_of(&keys).to_vec();
        let mut witnesses = elected_witnesses(s.get());
        witnesses.retain(|&w| s.get().clients()[w].state == 0); // not x once dropped
        if round == 2 && witnesses.len() > 1 {
            witnesses.pop();
        }
        for w in witnesses {
            m.send(
                "witness",
                &[&clients[w]],
                &[witness_with_blooms(
                    &run,
                    &keys,
                    w,
                    step,
                    &participant,
                    &broadcast,
                )],
            );
        }
        if round == 1 && n >= 2 {
            let s = m.env.state(&r.account_key());
            if let Some((v, t)) = evidence_pair(s.get()) {
                m.send(
                    "evidence",
                    &[&clients[v]],
                    &[run.evidence(&keys[v], v as u32, step, t as u16)],
                );
                evidence_sent = true;
            }
        }
        if m.env.run_state(&r) == RunState::RoundTrain {
            m.env.advance(config.max_round_train_time as i64 + 1);
            m.tick(&r);
        }
        assert_eq!(m.env.run_state(&r), RunState::RoundWitness);
        m.env.advance(config.round_witness_time as i64 + 1);
        m.tick(&r);
        assert_eq!(m.env.run_state(&r), RunState::RoundTrain);
    }
    assert_eq!(evidence_sent, n >= 4, "evidence by an elected verifier");
    let s = m.env.state(&r.account_key());
    let (agreed_step, agreed_hash) = (s.get().param_step, s.get().param_hash);
    assert_ne!(agreed_step, 0, "the witnesses agreed on the parameters");
    m.send(
        "checkpoint",
        &[&clients[y]],
        &[run.checkpoint(
            &keys[y],
            y as u32,
            &"r".repeat(64),
            &"v".repeat(64),
            agreed_step,
            agreed_hash,
        )],
    );
    m.send("resync", &[&clients[y]], &[run.resync(&keys[y], y as u32)]);
    m.send(
        "synced",
        &[&clients[y]],
        &[run.synced(&keys[y], y as u32, agreed_step, agreed_hash)],
    );
    if n >= 3 {
        m.send("withdraw", &[&clients[1]], &[run.withdraw(&keys[1])]);
    }
    m.send(
        "revoke_joiner",
        &[&join_authority],
        &[run.revoke_joiner(&join_authority.pubkey(), &payer, &keys[n.min(2) - 1])],
    );
    // the pause takes effect at the end of the epoch: rounds, cooldown, Paused
    m.send(
        "set_paused",
        &[&authority],
        &[run.set_paused(&authority.pubkey(), true)],
    );
    for _ in 0..100 {
        if m.env.run_state(&r) == RunState::Paused {
            break;
        }
        m.env.advance(40);
        m.tick(&r);
    }
    assert_eq!(m.env.run_state(&r), RunState::Paused);
    let eight: Vec<Pubkey> = (0..8).map(|_| Pubkey::new_unique()).collect();
    m.send(
        "set_delegates",
        &[&clients[y]],
        &[run.set_delegates(&payer, &keys[y], eight)],
    );
    let s = m.env.state(&r.account_key());
    let unsettled: Vec<usize> = (0..s.get().clients().len())
        .filter(|&i| s.get().clients()[i].unsettled())
        .collect();
    for i in unsettled {
        m.send(
            "settle_points",
            &[],
            &[run.settle_points(&payer, i as u32, &keys[i])],
        );
    }
    m.send(
        "free_coordinator",
        &[&authority],
        &[run.free_coordinator(&authority.pubkey(), &payer)],
    );
    m.table
}

#[test]
#[ignore = "a benchmark (minutes at 256 clients): python -m benchmarks.compute_units"]
fn compute_units_per_instruction_on_sbf() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sbf/psyche_coordinator.so");
    let elf = std::fs::read(&path).expect("sbf/psyche_coordinator.so (scripts/build-sbf)");
    let quiet = QuietStdout::new();
    let sizes = [1usize, 32, 256];
    let tables: Vec<Table> = sizes.iter().map(|&n| flow(&elf, n)).collect();
    drop(quiet);
    let mut labels: Vec<&String> = tables.iter().flat_map(|t| t.keys()).collect();
    labels.sort();
    labels.dedup();
    println!("compute units per transaction (most of `count`), SBF ELF under the VM");
    println!(
        "{:<44} {:>12} {:>12} {:>12}",
        "label", "1 client", "32 clients", "256 clients"
    );
    for label in &labels {
        let cell = |t: &Table| {
            t.get(*label)
                .map(|(u, c)| format!("{u} x{c}"))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{label:<44} {:>12} {:>12} {:>12}",
            cell(&tables[0]),
            cell(&tables[1]),
            cell(&tables[2])
        );
    }
    // every instruction of the program was measured at 256 clients
    for kind in INSTRUCTIONS {
        assert!(
            tables[2].keys().any(|k| k.split(' ').next() == Some(kind)),
            "{kind} not measured"
        );
    }
    if let Some(out) = std::env::var_os("PSYCHE_COMPUTE_UNITS_JSON") {
        let json: serde_json::Map<String, serde_json::Value> = sizes
            .iter()
            .zip(&tables)
            .map(|(n, t)| {
                let rows: serde_json::Map<String, serde_json::Value> = t
                    .iter()
                    .map(|(k, (u, c))| (k.clone(), serde_json::json!({"units": u, "count": c})))
                    .collect();
                (n.to_string(), serde_json::Value::Object(rows))
            })
            .collect();
        std::fs::write(out, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    }
}
