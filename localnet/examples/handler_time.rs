//! Native time per coordinator instruction through the runtime, in process (no RPC): each
//! instruction kind is sent as a signed transaction with `LocalChain::send` on a run of 256
//! clients, and one plain system transfer (the baseline) follows every measured transaction, so
//! both see the same machine load. Then the bare core operations on a boxed `CoordinatorState`
//! (no runtime), to show how much of an instruction is the runtime around the handler.
//!
//!     export CARGO_TARGET_DIR=$HOME/.cache/psyche/cargo-target
//!     cargo run --release -p psyche-localnet --example handler_time > /dev/null
//!
//! The report goes to stderr: natively the program's `msg!` prints to stdout, one line per
//! instruction. Options (after `--`): `--samples N`, transactions for tick, set_paused and
//! update (default 2000); `--rounds N`, witness rounds of 32 witnesses each (default 64).
//! The chain's clock is set by hand (`set_clock`/`advance_slot`); every measured transaction
//! gets a fresh blockhash (a new slot) so that repeated instructions never collide on their
//! signature.

// Results carry litesvm's own (large) failure metadata, as `LocalChain::send` returns it.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use psyche_coordinator::{CoordinatorAccount, RunConfigParams};
use psyche_coordinator_core::bloom::{bloom_add, key_hex};
use psyche_coordinator_core::{
    self as core_sm, committee, CoordinatorState, RunConfig, RunState, BLOOM_BYTES, MAX_CLIENTS,
    STATE_SIZE,
};
use psyche_localnet::ix::{self, Run};
use psyche_localnet::LocalChain;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::Transaction;

const T0: i64 = 1_700_000_000;
const CLIENTS: usize = 256;
/// Runs that 256 clients join (join_run and warmup_witness samples); run 0 then goes on.
const JOIN_RUNS: usize = 8;
const INIT_RUNS: usize = 200;
/// Health-check rounds; each leaves this many trainers out of its blooms, checked next round.
const HEALTH_ROUNDS: usize = 40;
const DROPS_PER_ROUND: usize = 4;
const SOL: u64 = 1_000_000_000;

const TRANSFER: &str = "system transfer (baseline)";

fn config() -> RunConfig {
    RunConfig {
        warmup_time: 1_000,
        cooldown_time: 1_000,
        max_round_train_time: 100_000,
        round_witness_time: 10,
        epoch_time: 10_000_000,
        total_steps: 1_000_000,
        min_clients: 1,
        init_min_clients: CLIENTS as u16,
        // 0 = 32 witnesses at 256 clients (witness_nodes may not exceed min_clients)
        witness_nodes: 0,
        global_batch_size_start: CLIENTS as u16,
        global_batch_size_end: CLIENTS as u16,
        ..RunConfig::DEFAULT
    }
}

/// A `CoordinatorState` in an 8-byte aligned heap buffer.
struct StateBuf(Vec<u64>);

impl StateBuf {
    fn new() -> Self {
        Self(vec![0; STATE_SIZE / 8])
    }
    fn load(&mut self, bytes: &[u8]) -> &mut Self {
        bytemuck::cast_slice_mut::<u64, u8>(&mut self.0).copy_from_slice(bytes);
        self
    }
    fn get(&self) -> &CoordinatorState {
        bytemuck::from_bytes(bytemuck::cast_slice(&self.0))
    }
    fn get_mut(&mut self) -> &mut CoordinatorState {
        bytemuck::from_bytes_mut(bytemuck::cast_slice_mut(&mut self.0))
    }
}

/// What was measured of one instruction kind.
#[derive(Default)]
struct Kind {
    /// `LocalChain::send`, microseconds.
    send: Vec<f64>,
    /// The transfer sent right after each of them (the paired baseline).
    transfer: Vec<f64>,
    /// `Transaction::verify` of the same transaction (its ed25519 signatures), timed apart.
    sigverify: Vec<f64>,
    /// Compute units the runtime counted. Natively that is the builtin's fixed cost and the
    /// sysvar reads: no instruction is metered.
    units: u64,
}

struct Bench {
    chain: LocalChain,
    now: i64,
    payer: Keypair,
    sink: Pubkey,
    transfers: u64,
    kinds: BTreeMap<&'static str, Kind>,
    /// `advance_slot` (not part of any transaction), microseconds.
    slots: Vec<f64>,
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64() * 1e6)
}

impl Bench {
    fn tx(&self, payer: &Keypair, signers: &[&Keypair], ixs: &[Instruction]) -> Transaction {
        let (hash, _) = self.chain.latest_blockhash();
        let msg = Message::new_with_blockhash(ixs, Some(&payer.pubkey()), &hash);
        let mut all = vec![payer];
        all.extend_from_slice(signers);
        Transaction::new(&all, msg, hash)
    }

    /// Sends in a new slot. With a `kind` it is timed, and a timed transfer follows.
    fn send(
        &mut self,
        kind: Option<&'static str>,
        payer: &Keypair,
        signers: &[&Keypair],
        ixs: &[Instruction],
    ) {
        let ((), us) = timed(|| self.chain.advance_slot(self.now));
        self.slots.push(us);
        let tx = self.tx(payer, signers, ixs);
        let (verified, verify_us) = timed(|| tx.verify());
        verified.expect("signatures");
        let (result, us) = timed(|| self.chain.send(tx.into()));
        let meta = result.unwrap_or_else(|f| {
            panic!(
                "{} failed: {:?}\n{}",
                kind.unwrap_or("setup"),
                f.err,
                f.meta.logs.join("\n")
            )
        });
        if let Some(kind) = kind {
            let transfer = self.transfer();
            let k = self.kinds.entry(kind).or_default();
            k.send.push(us);
            k.sigverify.push(verify_us);
            k.units = meta.compute_units_consumed;
            k.transfer.push(transfer.0);
            let t = self.kinds.entry(TRANSFER).or_default();
            t.send.push(transfer.0);
            t.transfer.push(transfer.0);
            t.sigverify.push(transfer.1);
            t.units = transfer.2;
        }
    }

    /// A system transfer from the payer: (send us, verify us, units).
    fn transfer(&mut self) -> (f64, f64, u64) {
        self.transfers += 1;
        // a different amount each time: a distinct signature under the same blockhash
        let ixs = [solana_system_interface::instruction::transfer(
            &self.payer.pubkey(),
            &self.sink,
            self.transfers,
        )];
        let tx = self.tx(&self.payer, &[], &ixs);
        let (verified, verify_us) = timed(|| tx.verify());
        verified.expect("signature");
        let (result, us) = timed(|| self.chain.send(tx.into()));
        (
            us,
            verify_us,
            result.expect("transfer").compute_units_consumed,
        )
    }

    fn state(&self, account: &Pubkey) -> StateBuf {
        let data = self
            .chain
            .get_account(account)
            .expect("coordinator account")
            .data;
        let mut buf = StateBuf::new();
        buf.load(&data[8..]);
        buf
    }
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    let median = s[s.len() / 2];
    let p90 = s[(s.len() * 9 / 10).min(s.len() - 1)];
    (mean, median, p90)
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let samples = arg("--samples", 2000);
    let rounds = arg("--rounds", 64);
    let wall = Instant::now();

    let mut chain = LocalChain::new(T0);
    let payer = Keypair::new();
    let sink = Keypair::new().pubkey();
    chain.airdrop(&payer.pubkey(), 500_000 * SOL).unwrap();
    chain.airdrop(&sink, SOL).unwrap();
    let clients: Vec<Keypair> = (0..CLIENTS).map(|_| Keypair::new()).collect();
    for c in &clients {
        chain.airdrop(&c.pubkey(), 10 * SOL).unwrap();
    }
    let rent = chain
        .svm
        .minimum_balance_for_rent_exemption(CoordinatorAccount::SPACE);
    let mut b = Bench {
        chain,
        now: T0,
        payer,
        sink,
        transfers: 0,
        kinds: BTreeMap::new(),
        slots: Vec::new(),
    };
    for _ in 0..200 {
        b.transfer(); // warm-up
    }
    let payer = b.payer.insecure_clone();
    let me = payer.pubkey();

    // ---- init_coordinator (with the system create_account of the 138 KB account)
    eprintln!("init_coordinator x{INIT_RUNS}");
    let mut runs = Vec::new();
    for i in 0..INIT_RUNS {
        let account = Keypair::new();
        let run_id = format!("bench-{i}");
        let run = Run::new(&run_id, account.pubkey());
        let params = RunConfigParams::from_core(&config());
        let ixs = [
            ix::create_coordinator_account(&me, &account.pubkey(), rent),
            run.init(&me, &run_id, me, me, true, params, 7 + i as u64),
        ];
        b.send(
            Some("init_coordinator + create_account"),
            &payer,
            &[&account],
            &ixs,
        );
        runs.push(run);
    }

    // ---- set_paused and update on spare runs
    eprintln!("set_paused x{samples}, update x{samples}");
    let spare = runs[INIT_RUNS - 1];
    for i in 0..samples {
        // resume (Uninitialized/Paused -> WaitingForMembers), pause (-> Paused), ...
        let ixs = [spare.set_paused(&me, i % 2 == 1)];
        b.send(Some("set_paused"), &payer, &[], &ixs);
    }
    let spare = runs[INIT_RUNS - 2];
    b.send(None, &payer, &[], &[spare.set_paused(&me, false)]);
    b.send(None, &payer, &[], &[spare.set_paused(&me, true)]);
    let params = RunConfigParams::from_core(&config());
    for _ in 0..samples {
        let ixs = [spare.update(&me, Some(params), None)];
        b.send(Some("update (config)"), &payer, &[], &ixs);
    }

    // ---- join_run: 256 clients on each of JOIN_RUNS runs
    eprintln!("join_run x{}", JOIN_RUNS * CLIENTS);
    for run in &runs[..JOIN_RUNS] {
        b.send(None, &payer, &[], &[run.set_paused(&me, false)]);
        for (i, c) in clients.iter().enumerate() {
            let ixs = [run.join_run(&c.pubkey(), None, [i as u8; 32])];
            b.send(Some("join_run"), c, &[], &ixs);
        }
    }
    // past waiting_for_members_extra_time: a tick starts each epoch
    b.now += 4;
    for run in &runs[..JOIN_RUNS] {
        let ixs = [run.tick(&me)];
        b.send(Some("tick, WaitingForMembers -> Warmup"), &payer, &[], &ixs);
        assert_eq!(b.state(&run.account).get().run_state(), RunState::Warmup);
    }
    // ---- warmup_witness: 32 per run, the 32nd starts the first round
    eprintln!("warmup_witness x{}", JOIN_RUNS * 32);
    for run in &runs[..JOIN_RUNS] {
        for (i, c) in clients.iter().enumerate().take(32) {
            let ixs = [run.warmup_witness(&c.pubkey(), i as u32)];
            b.send(Some("warmup_witness"), c, &[], &ixs);
        }
        assert_eq!(
            b.state(&run.account).get().run_state(),
            RunState::RoundTrain
        );
    }

    // ---- run 0 from here on: 256 participants in RoundTrain
    let run = runs[0];
    eprintln!("tick (nothing due) x{samples}");
    for i in 0..samples {
        let c = &clients[i % CLIENTS];
        b.send(Some("tick, nothing due"), c, &[], &[run.tick(&c.pubkey())]);
    }

    // Blooms as a witness of a full round sends them: every trainer, one commitment each.
    let bloom = |leave_out: &[usize]| {
        let mut participants = [0u8; BLOOM_BYTES];
        let mut broadcast = [0u8; BLOOM_BYTES];
        for (i, c) in clients.iter().enumerate() {
            if !leave_out.contains(&i) {
                bloom_add(&mut participants, &key_hex(&c.pubkey().to_bytes()));
                bloom_add(&mut broadcast, &key_hex(&[i as u8 ^ 0x5a; 32]));
            }
        }
        (participants.to_vec(), broadcast.to_vec())
    };
    // One round: the elected witnesses send; an unhealthy one is skipped (then the round ends
    // by time); a tick after round_witness_time starts the next round.
    let mut snapshots: Option<(StateBuf, Vec<usize>, StateBuf, u64)> = None;
    let mut round = |b: &mut Bench, blooms: &(Vec<u8>, Vec<u8>), timed: bool| {
        let st = b.state(&run.account);
        let s = st.get();
        assert_eq!(s.run_state(), RunState::RoundTrain);
        let step = s.header.step;
        let mut out = [0u8; MAX_CLIENTS];
        let n = committee::witnesses(s.current_round(), s.config.witness_nodes, &mut out);
        let elected: Vec<usize> = out[..n].iter().map(|&i| i as usize).collect();
        for &i in &elected {
            if !s.clients[i].is_healthy() {
                continue;
            }
            let c = &clients[i];
            let ixs = [run.witness(
                &c.pubkey(),
                i as u32,
                step,
                blooms.0.clone(),
                blooms.1.clone(),
                [i as u8; 32],
                [step as u8 | 1; 32],
            )];
            let kind = timed.then_some("witness (2 x 356-byte blooms)");
            b.send(kind, c, &[], &ixs);
        }
        if b.state(&run.account).get().run_state() == RunState::RoundTrain {
            b.now += config().max_round_train_time as i64;
            b.send(None, &payer, &[], &[run.tick(&me)]);
        }
        let before = b.state(&run.account);
        assert_eq!(before.get().run_state(), RunState::RoundWitness);
        b.now += config().round_witness_time as i64;
        let kind = timed.then_some("tick, RoundWitness -> RoundTrain");
        b.send(kind, &payer, &[], &[run.tick(&me)]);
        let after = b.state(&run.account);
        assert_eq!(after.get().run_state(), RunState::RoundTrain);
        assert_eq!(after.get().header.step, step + 1);
        if snapshots.is_none() {
            snapshots = Some((st, elected, before, b.now as u64));
        }
    };

    eprintln!("witness: {rounds} rounds x 32");
    let full = bloom(&[]);
    for _ in 0..rounds {
        round(&mut b, &full, true);
    }

    // ---- health_check: each round leaves some trainers out of its blooms; the next round a
    // client reports them (one target per transaction) and they are dropped.
    eprintln!("health_check: {HEALTH_ROUNDS} rounds x {DROPS_PER_ROUND}");
    let reporter = CLIENTS - 1;
    let mut left_out: Vec<usize> = Vec::new();
    let mut next = 0;
    let mut false_positives = 0;
    for _ in 0..HEALTH_ROUNDS {
        let st = b.state(&run.account);
        for &t in &left_out {
            if core_sm::is_healthy(st.get(), t) {
                false_positives += 1; // its key hit the bloom anyway (error rate 0.005)
                continue;
            }
            let c = &clients[reporter];
            let ixs = [run.health_check(&c.pubkey(), reporter as u32, vec![t as u16])];
            b.send(Some("health_check (1 target)"), c, &[], &ixs);
        }
        left_out = (next..next + DROPS_PER_ROUND).collect();
        next += DROPS_PER_ROUND;
        round(&mut b, &bloom(&left_out), false);
    }
    let healthy = b.state(&run.account).get().healthy_count();
    eprintln!("healthy clients left: {healthy} (bloom false positives: {false_positives})");
    let runtime_wall = wall.elapsed().as_secs_f64();

    // ---- the bare core on a boxed state (no runtime, no account copies)
    let (train, elected, witnessed, t_end) = snapshots.expect("at least one round");
    let now = train.get().header.run_state_start;
    let step = train.get().header.step;
    let reps = 200;
    let blooms = full;
    let mut work = StateBuf::new();
    let mut core_rows: Vec<(&str, Vec<f64>)> = Vec::new();

    let mut v = Vec::new();
    work.load(bytemuck::cast_slice(&train.0));
    for _ in 0..reps {
        let n = 1000;
        let start = Instant::now();
        for _ in 0..n {
            core_sm::tick(black_box(work.get_mut()), black_box(now)).unwrap();
        }
        v.push(start.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    assert_eq!(work.get().run_state(), RunState::RoundTrain);
    core_rows.push(("tick, nothing due", v));

    let mut v = Vec::new();
    for _ in 0..reps {
        work.load(bytemuck::cast_slice(&train.0));
        for &i in &elected {
            let signer = clients[i].pubkey().to_bytes();
            let start = Instant::now();
            let s = work.get_mut();
            // as the handler: the operation, then a tick at the same time
            core_sm::witness(
                s,
                now,
                &signer,
                i as u32,
                step,
                &blooms.0,
                &blooms.1,
                &[i as u8; 32],
                &[step as u8 | 1; 32],
            )
            .unwrap();
            let _ = core_sm::tick(s, now);
            v.push(start.elapsed().as_secs_f64() * 1e6);
        }
        assert_eq!(work.get().run_state(), RunState::RoundWitness);
    }
    core_rows.push(("witness (2 x 356-byte blooms)", v));

    let mut v = Vec::new();
    for _ in 0..reps {
        work.load(bytemuck::cast_slice(&witnessed.0));
        let start = Instant::now();
        core_sm::tick(work.get_mut(), t_end).unwrap();
        v.push(start.elapsed().as_secs_f64() * 1e6);
        assert_eq!(work.get().run_state(), RunState::RoundTrain);
    }
    core_rows.push(("tick, RoundWitness -> RoundTrain", v));

    // what one copy / one comparison of the account costs here
    let account = vec![1u8; CoordinatorAccount::SPACE];
    let mut other = vec![0u8; CoordinatorAccount::SPACE];
    let mut copy = Vec::new();
    let mut cmp = Vec::new();
    for _ in 0..reps {
        let start = Instant::now();
        other.copy_from_slice(black_box(&account));
        copy.push(start.elapsed().as_secs_f64() * 1e6);
        let start = Instant::now();
        black_box(black_box(&account) == black_box(&other));
        cmp.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let start = Instant::now();
    for _ in 0..reps {
        black_box(black_box(&account).clone());
    }
    let alloc_copy = start.elapsed().as_secs_f64() * 1e6 / reps as f64;

    // ---- report (stderr: the program's msg! lines go to stdout natively, see the README)
    let median = |v: &[f64]| stats(v).1;
    let total: usize = b.kinds.values().map(|k| k.send.len()).sum();
    eprintln!(
        "\nthrough the runtime: LocalChain::send, {total} transactions in {runtime_wall:.1} s \
         (x transfer: against the transfers sent right after that kind; sigverify: \
         Transaction::verify of the same transactions, timed apart; rest = median - sigverify)"
    );
    eprintln!(
        "{:<34} {:>5} {:>8} {:>8} {:>8} {:>7} {:>7} {:>9} {:>7} {:>4}",
        "instruction",
        "n",
        "mean us",
        "median",
        "p90",
        "x mean",
        "x med",
        "sigverify",
        "rest",
        "CU"
    );
    let mut order: Vec<_> = b.kinds.iter().collect();
    order.sort_by(|x, y| median(&x.1.send).total_cmp(&median(&y.1.send)));
    for (kind, k) in order {
        let (mean, med, p90) = stats(&k.send);
        let (base_mean, base_median, _) = stats(&k.transfer);
        let verify = median(&k.sigverify);
        eprintln!(
            "{:<34} {:>5} {:>8.1} {:>8.1} {:>8.1} {:>7.2} {:>7.2} {:>9.1} {:>7.1} {:>4}",
            kind,
            k.send.len(),
            mean,
            med,
            p90,
            mean / base_mean,
            med / base_median,
            verify,
            med - verify,
            k.units
        );
    }
    eprintln!("\nthe bare core (boxed CoordinatorState, no runtime, no signatures):");
    eprintln!(
        "{:<34} {:>5} {:>8} {:>8} {:>26}",
        "operation", "n", "mean us", "median", "runtime rest - core (us)"
    );
    for (kind, v) in &core_rows {
        let (mean, med, _) = stats(v);
        let k = &b.kinds[kind];
        let rest = median(&k.send) - median(&k.sigverify);
        eprintln!(
            "{:<34} {:>5} {:>8.3} {:>8.3} {:>26.1}",
            kind,
            v.len(),
            mean,
            med,
            rest - med
        );
    }
    eprintln!(
        "\n137,992-byte account: copy {:.2} us, compare {:.2} us, clone (alloc + copy) {:.2} us \
         (medians); advance_slot (setup, not in any transaction): median {:.1} us",
        median(&copy),
        median(&cmp),
        alloc_copy,
        median(&b.slots)
    );
}
