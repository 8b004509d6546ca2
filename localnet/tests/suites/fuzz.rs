//! Fuzzing the program through the runtime: at least 10,000 random instructions, signed and sent
//! as transactions to `LocalChain` while a live run goes through its epochs (clients join,
//! warm up, witness, the clock advances). Three kinds of random instructions:
//!
//! - (a) random data of random length, with a random account list drawn from a pool (the runs'
//!   instances and coordinator accounts, authorizations, wallets that sign, fresh keys, the
//!   system program, sysvars, the program id, a wrong-size program account, a blank one);
//! - (b) a valid instruction discriminator (the 15 instructions and Anchor's IDL tag) followed
//!   by random bytes, mostly with the instruction's own accounts;
//! - (c) a valid instruction for the current state, mutated: bytes flipped or overwritten,
//!   data truncated or extended, accounts swapped, replaced, dropped or added, writable and
//!   signer flags toggled (a signer flag is only set on a key the fuzzer can sign for).
//!
//! After every transaction: no `ProgramFailedToComplete` (what a panic in the program
//! becomes), a failed transaction changed no watched account, the instances never change,
//! a coordinator account disappears only through a successful `free_coordinator` of a halted
//! run, and every coordinator account keeps its size, owner and discriminator and decodes as a
//! `CoordinatorState` that passes `check_state` (the core has no invariant checker beyond
//! `RunConfig::validate`; the rest is written here from the layout's documented rules).
//!
//! Reproducible: every key and every choice comes from the seed (`PSYCHE_FUZZ_SEED`, default
//! below); `PSYCHE_FUZZ_TXS` sets the number of random instructions. A failure names the seed
//! and the iteration. `cargo test -p psyche-localnet --test localnet suites::fuzz --
//! --nocapture` prints the histogram of outcomes.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use anchor_lang::{AccountDeserialize, Discriminator};
use psyche_coordinator::{
    CheckpointKindParam, CheckpointParams, CoordinatorAccount, CoordinatorInstance, RunConfigParams,
};
use psyche_coordinator_core::{
    bloom::key_hex, committee, is_healthy, tick_deadline, CheckpointKind, Client, ClientPhase,
    ClientState, CoordinatorState, RunConfig, RunState, BLOOM_BITS, BLOOM_BYTES, LAYOUT_VERSION,
    MAX_CLIENTS, MAX_WITNESSES, NUM_STORED_ROUNDS, REPO_LEN, RUN_ID_LEN,
};
use psyche_localnet::ix::{authorization_key, Run, PROGRAM_ID};
use solana_account::Account;
use solana_instruction::error::InstructionError;
use solana_instruction::{AccountMeta, Instruction};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::Transaction;
use solana_transaction_error::TransactionError;

use crate::support::sbf_heap;
use crate::support::*;

const DEFAULT_SEED: u64 = 0x7073_7963_6865_0001;
const DEFAULT_TXS: usize = 10_000;

// ------------------------------------------------------------------------------ rng

/// splitmix64: small, fast, and the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.0)
    }
    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    /// A length: mostly short, sometimes up to `max`.
    fn len(&mut self, max: usize) -> usize {
        match self.below(4) {
            0 => self.below(9),
            1 => self.below(65),
            _ => self.below(max + 1),
        }
    }
    /// An integer that hits edges: small, around powers of two, extremes.
    fn interesting_u32(&mut self) -> u32 {
        *self.pick(&[
            0,
            1,
            2,
            3,
            7,
            8,
            31,
            32,
            255,
            256,
            257,
            356,
            65_535,
            65_536,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX - 1,
            u32::MAX,
        ])
    }
}

// ------------------------------------------------------------------------------ instructions

const KINDS: [&str; 18] = INSTRUCTIONS;
const INIT: usize = 0;
const FREE: usize = 10;

/// The 8-byte discriminators of the 18 instructions, then Anchor's IDL instruction tag.
fn discriminators() -> Vec<[u8; 8]> {
    use psyche_coordinator::instruction as d;
    let mut out: Vec<[u8; 8]> = [
        d::InitCoordinator::DISCRIMINATOR,
        d::Update::DISCRIMINATOR,
        d::SetPaused::DISCRIMINATOR,
        d::JoinRun::DISCRIMINATOR,
        d::Tick::DISCRIMINATOR,
        d::Witness::DISCRIMINATOR,
        d::WarmupWitness::DISCRIMINATOR,
        d::HealthCheck::DISCRIMINATOR,
        d::Checkpoint::DISCRIMINATOR,
        d::Withdraw::DISCRIMINATOR,
        d::FreeCoordinator::DISCRIMINATOR,
        d::AuthorizeJoiner::DISCRIMINATOR,
        d::RevokeJoiner::DISCRIMINATOR,
        d::Synced::DISCRIMINATOR,
        d::Resync::DISCRIMINATOR,
        d::SetDelegates::DISCRIMINATOR,
        d::SettlePoints::DISCRIMINATOR,
        d::Evidence::DISCRIMINATOR,
    ]
    .iter()
    .map(|d| <[u8; 8]>::try_from(*d).expect("8-byte discriminators"))
    .collect();
    out.push(anchor_lang::idl::IDL_IX_TAG.to_le_bytes());
    out
}

/// A transaction to send: instructions before the program's (a `create_account`), the
/// program's instruction last.
struct Built {
    pre: Vec<Instruction>,
    ix: Instruction,
}

impl Built {
    fn one(ix: Instruction) -> Self {
        Built { pre: vec![], ix }
    }
}

// ------------------------------------------------------------------------------ state

/// A run the fuzzer keeps: slot 0 is the live run (permissionless, driven through its epochs),
/// slot 1 an idle permissionless run, slot 2 a permissioned run.
struct Slot {
    r: TestRun,
    /// Iterations without a change of (state, step, epoch, clients, pending).
    stale: usize,
    mark: (u8, u32, u32, u16, u16, u64),
}

fn mark_of(s: &CoordinatorState) -> (u8, u32, u32, u16, u16, u64) {
    let h = &s.header;
    (
        h.run_state,
        h.step,
        h.epoch,
        h.clients_len,
        h.pending_len,
        h.run_state_start,
    )
}

fn live_config() -> RunConfig {
    RunConfig {
        warmup_time: 10,
        cooldown_time: 3,
        max_round_train_time: 8,
        round_witness_time: 2,
        epoch_time: 90,
        total_steps: 1_000_000,
        min_clients: 2,
        init_min_clients: 3,
        witness_nodes: 2,
        global_batch_size_start: 16,
        global_batch_size_end: 16,
        verification_percent: 25,
        checkpointer_percent: 50,
        waiting_for_members_extra_time: 2,
        // joins mid-epoch: queued, syncing two at a time, one warmup round
        max_syncing: 2,
        sync_warmup_rounds: 1,
        ..RunConfig::DEFAULT
    }
}

struct Fuzz {
    env: Env,
    rng: Rng,
    seed: u64,
    iteration: usize,
    /// Every key the fuzzer can sign for.
    keys: HashMap<Pubkey, Keypair>,
    /// Funded wallets that may pay fees.
    wallets: Vec<Pubkey>,
    clients: Vec<Pubkey>,
    slots: Vec<Slot>,
    generation: usize,
    /// Program-owned accounts: exactly the coordinator size but blank, and a wrong size.
    blank: Pubkey,
    junk: Pubkey,
    /// Grantees authorized on the permissioned run.
    grantees: Vec<Pubkey>,
    fixed: Vec<Pubkey>,
    discs: Vec<[u8; 8]>,
    /// Coordinator accounts created by fuzzed `init_coordinator`s, and abandoned runs.
    others: Vec<Pubkey>,
    outcomes: Histogram,
    driver: Histogram,
    kinds: Histogram,
    states: Histogram,
    fuzz_txs: usize,
    driver_txs: usize,
    categories: Histogram,
    /// Each outcome's first iteration and instruction kind (`PSYCHE_FUZZ_TRACE=<iteration>`
    /// prints that iteration's transactions).
    first_seen: BTreeMap<String, (usize, Option<usize>)>,
    trace: Option<usize>,
    /// The last bytes of each coordinator account that passed `check_state`.
    validated: HashMap<Pubkey, Vec<u8>>,
    /// The modelled SBF heap of the program's instruction: the largest per instruction kind
    /// (successful or refused by a handler), and the transactions over 32 KiB.
    heap_max: BTreeMap<&'static str, usize>,
    over_heap: usize,
    over_heap_first: Option<usize>,
}

impl Fuzz {
    fn new(seed: u64) -> Fuzz {
        let mut env = Env::seeded(seed);
        sbf_heap::install(&mut env);
        env.chain
            .airdrop(&env.payer.pubkey(), 100_000 * SOL)
            .unwrap();
        let blank = env.new_keypair();
        let junk = env.new_keypair();
        env.preallocate(&blank, CoordinatorAccount::SPACE, &PROGRAM_ID);
        env.preallocate(&junk, 100, &PROGRAM_ID);
        let mut fuzz = Fuzz {
            rng: Rng(seed),
            seed,
            iteration: 0,
            keys: HashMap::new(),
            wallets: vec![],
            clients: vec![],
            slots: vec![],
            generation: 0,
            blank: blank.pubkey(),
            junk: junk.pubkey(),
            grantees: vec![],
            fixed: vec![
                solana_sdk_ids::system_program::ID,
                PROGRAM_ID,
                solana_sdk_ids::sysvar::clock::ID,
                solana_sdk_ids::sysvar::rent::ID,
                solana_sdk_ids::sysvar::instructions::ID,
                solana_sdk_ids::sysvar::slot_hashes::ID,
                solana_sdk_ids::native_loader::ID,
                solana_sdk_ids::bpf_loader_upgradeable::ID,
            ],
            discs: discriminators(),
            others: vec![],
            outcomes: Histogram::default(),
            driver: Histogram::default(),
            kinds: Histogram::default(),
            states: Histogram::default(),
            fuzz_txs: 0,
            driver_txs: 0,
            categories: Histogram::default(),
            first_seen: BTreeMap::new(),
            validated: HashMap::new(),
            heap_max: BTreeMap::new(),
            over_heap: 0,
            over_heap_first: None,
            trace: std::env::var("PSYCHE_FUZZ_TRACE")
                .ok()
                .and_then(|v| v.parse().ok()),
            env,
        };
        let payer = fuzz.env.payer.insecure_clone();
        fuzz.add_wallet(payer);
        for _ in 0..8 {
            let c = fuzz.env.keypair();
            fuzz.clients.push(c.pubkey());
            fuzz.add_wallet(c);
        }
        fuzz.keys.insert(blank.pubkey(), blank);
        fuzz.keys.insert(junk.pubkey(), junk);
        for i in 0..3 {
            let slot = fuzz.new_slot(i);
            fuzz.slots.push(slot);
        }
        // the permissioned run: started, two grantees, one joined
        let c = fuzz.slots[2].r.run;
        fuzz.env.resume(&fuzz.slots[2].r);
        for g in [fuzz.clients[6], fuzz.clients[7]] {
            fuzz.env.authorize(&fuzz.slots[2].r, &g);
            fuzz.grantees.push(g);
        }
        let g = fuzz.keys[&fuzz.clients[6]].insecure_clone();
        let auth = authorization_key(&c.instance, &g.pubkey());
        fuzz.env.join(&fuzz.slots[2].r, &g, Some(auth));
        fuzz
    }

    fn add_wallet(&mut self, k: Keypair) {
        let key = k.pubkey();
        if self.env.account(&key).map_or(0, |a| a.lamports) < 100 * SOL {
            self.env.chain.airdrop(&key, 100 * SOL).unwrap();
        }
        self.wallets.push(key);
        self.keys.insert(key, k);
    }

    /// A new run for slot `i` (0: live, 1: idle, 2: permissioned), with fresh authorities.
    fn new_slot(&mut self, i: usize) -> Slot {
        self.generation += 1;
        let id = format!("fuzz-{i}-{}", self.generation);
        let config = if i == 1 {
            test_config(2)
        } else {
            live_config()
        };
        let r = self.env.create_run(&id, i != 2, config);
        for k in [&r.authority, &r.join_authority] {
            self.add_wallet(k.insecure_clone());
        }
        self.keys
            .insert(r.account.pubkey(), r.account.insecure_clone());
        let mark = mark_of(self.env.state(&r.account_key()).get());
        Slot { r, stale: 0, mark }
    }

    fn state(&self, slot: usize) -> StateBuf {
        self.env.state(&self.slots[slot].r.account_key())
    }

    // -------------------------------------------------------------------------- pools

    /// An account for a random account list, and whether the fuzzer can sign for it.
    fn pool_key(&mut self) -> Pubkey {
        match self.rng.below(8) {
            0 | 1 => {
                let s = &self.slots[self.rng.below(self.slots.len())].r;
                *self.rng.pick(&[s.instance(), s.account_key()])
            }
            2 => *self.rng.pick(&self.wallets.clone()),
            3 => *self.rng.pick(&self.fixed.clone()),
            4 => *self.rng.pick(&[self.blank, self.junk]),
            5 => {
                let g = *self.rng.pick(&self.clients.clone());
                let s = self.slots[self.rng.below(self.slots.len())].r.instance();
                authorization_key(&s, &g)
            }
            6 => Pubkey::new_from_array(self.rng.bytes(32).try_into().unwrap()),
            _ => {
                let s = &self.slots[0].r;
                *self.rng.pick(&[s.instance(), s.account_key()])
            }
        }
    }

    fn random_meta(&mut self) -> AccountMeta {
        let pubkey = self.pool_key();
        let signer = self.keys.contains_key(&pubkey) && self.rng.percent(50);
        AccountMeta {
            pubkey,
            is_signer: signer,
            is_writable: self.rng.percent(50),
        }
    }

    /// A slot for a generated instruction: mostly the live run.
    fn target(&mut self) -> usize {
        match self.rng.below(10) {
            0..=5 => 0,
            6 => 1,
            _ => 2,
        }
    }

    /// A client of the slot's current epoch (its key and index) when there is one, else a
    /// random client key and index.
    fn client_of(&mut self, slot: usize) -> (Pubkey, u32) {
        let s = self.state(slot);
        let n = s.get().clients().len();
        if n > 0 && self.rng.percent(85) {
            let i = self.rng.below(n);
            let key = Pubkey::new_from_array(s.get().clients()[i].signer);
            if self.keys.contains_key(&key) {
                return (key, i as u32);
            }
        }
        let key = *self.rng.pick(&self.clients.clone());
        (key, self.rng.below(n + 2) as u32)
    }

    fn random_string(&mut self, max: usize) -> String {
        let n = self.rng.len(max);
        match self.rng.below(6) {
            0 => "é".repeat(n / 2),
            1 => {
                let mut s: String = (0..n)
                    .map(|_| (b'a' + self.rng.below(26) as u8) as char)
                    .collect();
                if n > 0 {
                    let at = self.rng.below(n);
                    s.replace_range(at..at + 1, "\0");
                }
                s
            }
            _ => (0..n)
                .map(|_| (b'!' + self.rng.below(94) as u8) as char)
                .collect(),
        }
    }

    fn random_config(&mut self) -> RunConfigParams {
        let mut c = if self.rng.percent(50) {
            live_config()
        } else {
            test_config(2)
        };
        match self.rng.below(8) {
            0 => c.epoch_time = self.rng.next() % 200,
            1 => c.min_clients = self.rng.below(6) as u16,
            2 => c.witness_nodes = self.rng.below(4) as u16,
            3 => c.total_steps = self.rng.below(4) as u32,
            4 => c.round_witness_time = self.rng.below(5) as u64,
            5 => c.global_batch_size_end = self.rng.below(20) as u16,
            _ => {}
        }
        RunConfigParams::from_core(&c)
    }

    fn bloom(&mut self) -> Vec<u8> {
        match self.rng.below(6) {
            0 => vec![0; BLOOM_BYTES],
            1 => {
                let mut b = self.rng.bytes(BLOOM_BYTES);
                b[BLOOM_BITS / 8..].fill(0);
                b
            }
            2 => {
                let n = self.rng.len(600);
                self.rng.bytes(n)
            }
            _ => {
                let keys: Vec<Pubkey> = self.clients.clone();
                bloom_of(&keys).to_vec()
            }
        }
    }

    // -------------------------------------------------------------------------- generators

    /// A plausible instruction of `kind` for the current state (mostly well-formed, often
    /// accepted; arguments and signers vary).
    fn valid(&mut self, kind: usize) -> Built {
        let t = self.target();
        let run: Run = self.slots[t].r.run;
        let authority = self.slots[t].r.authority.pubkey();
        let join_authority = self.slots[t].r.join_authority.pubkey();
        let payer = self.env.payer.pubkey();
        let any_wallet = *self.rng.pick(&self.wallets.clone());
        let (step, agreed) = {
            let s = self.state(t);
            (
                s.get().header.step,
                (s.get().param_step, s.get().param_hash),
            )
        };
        match kind {
            INIT => {
                let id = match self.rng.below(5) {
                    0 => self.slots[0].r.id.clone(),
                    1 => String::new(),
                    2 => "x".repeat(33),
                    _ => format!("init-{}", self.rng.next() % 1_000_000),
                };
                let config = self.random_config();
                let permissionless = self.rng.percent(50);
                let init = |account: &Pubkey| {
                    Run::new(&id, *account).init(
                        &payer,
                        &id,
                        authority,
                        join_authority,
                        permissionless,
                        config,
                        7,
                    )
                };
                match self.rng.below(4) {
                    0 => Built::one(init(&self.blank)),
                    1 => Built::one(init(&self.slots[0].r.account_key())),
                    _ => {
                        let fresh = self.env.new_keypair();
                        let space = if self.rng.percent(80) {
                            CoordinatorAccount::SPACE
                        } else {
                            self.rng.below(CoordinatorAccount::SPACE + 9)
                        };
                        let lamports = self.env.chain.svm.minimum_balance_for_rent_exemption(space);
                        let pre = solana_system_interface::instruction::create_account(
                            &payer,
                            &fresh.pubkey(),
                            lamports,
                            space as u64,
                            &PROGRAM_ID,
                        );
                        let ix = init(&fresh.pubkey());
                        self.keys.insert(fresh.pubkey(), fresh);
                        Built { pre: vec![pre], ix }
                    }
                }
            }
            1 => {
                let signer = if self.rng.percent(85) {
                    authority
                } else {
                    any_wallet
                };
                let config = if self.rng.percent(50) {
                    Some(self.random_config())
                } else {
                    None
                };
                let checkpoint = if self.rng.percent(50) {
                    Some(CheckpointParams {
                        kind: *self.rng.pick(&[
                            CheckpointKindParam::Dummy,
                            CheckpointKindParam::Hub,
                            CheckpointKindParam::P2P,
                            CheckpointKindParam::Stored,
                        ]),
                        repo: self.random_string(70),
                        revision: self.random_string(70),
                        hash: if self.rng.percent(30) {
                            [0; 32]
                        } else {
                            self.rng.bytes(32).try_into().unwrap()
                        },
                        step: self.rng.interesting_u32(),
                    })
                } else {
                    None
                };
                Built::one(run.update(&signer, config, checkpoint))
            }
            2 => {
                let signer = if self.rng.percent(85) {
                    authority
                } else {
                    any_wallet
                };
                Built::one(run.set_paused(&signer, self.rng.percent(30)))
            }
            3 => {
                let user = *self.rng.pick(&self.clients.clone());
                let authorization = match self.rng.below(3) {
                    0 => None,
                    1 => Some(authorization_key(&run.instance, &user)),
                    _ => Some(self.pool_key()),
                };
                let p2p: [u8; 32] = self.rng.bytes(32).try_into().unwrap();
                if self.rng.percent(20) {
                    // as another identity: accepted when it lists the user as a delegate
                    let identity = *self.rng.pick(&self.clients.clone());
                    return Built::one(run.join_run_as(&user, authorization, p2p, &identity));
                }
                Built::one(run.join_run(&user, authorization, p2p))
            }
            4 => Built::one(run.tick(&any_wallet)),
            5 => {
                let (user, index) = self.client_of(t);
                let step = match self.rng.below(5) {
                    0 => self.rng.interesting_u32(),
                    1 => step.wrapping_sub(1),
                    _ => step,
                };
                let (p, b) = (self.bloom(), self.bloom());
                let merkle: [u8; 32] = self.rng.bytes(32).try_into().unwrap();
                let params = match self.rng.below(4) {
                    0 => [0; 32],
                    1 => self.rng.bytes(32).try_into().unwrap(),
                    _ => params_at(step),
                };
                Built::one(run.witness(&user, index, step, p, b, merkle, params))
            }
            6 => {
                let (user, index) = self.client_of(t);
                Built::one(run.warmup_witness(&user, index))
            }
            7 => {
                let (user, index) = self.client_of(t);
                let n = match self.rng.below(6) {
                    0 => 0,
                    1 => 256,
                    2 => 257,
                    _ => self.rng.range(1, 4),
                };
                let targets = (0..n)
                    .map(|_| {
                        if self.rng.percent(80) {
                            self.rng.below(6) as u16
                        } else {
                            self.rng.next() as u16
                        }
                    })
                    .collect();
                Built::one(run.health_check(&user, index, targets))
            }
            8 => {
                let (user, index) = self.client_of(t);
                let (repo, revision) = (self.random_string(66), self.random_string(66));
                // mostly the agreed pair (recorded), else another step or hash (refused)
                let (ck_step, ck_hash) = match self.rng.below(4) {
                    0 => (self.rng.interesting_u32(), agreed.1),
                    1 => (agreed.0, self.rng.bytes(32).try_into().unwrap()),
                    _ => agreed,
                };
                Built::one(run.checkpoint(&user, index, &repo, &revision, ck_step, ck_hash))
            }
            9 => {
                let (user, _) = self.client_of(t);
                Built::one(run.withdraw(&user))
            }
            FREE => {
                let signer = if self.rng.percent(85) {
                    authority
                } else {
                    any_wallet
                };
                let spill = self.pool_key();
                Built::one(run.free_coordinator(&signer, &spill))
            }
            11 => {
                let signer = if self.rng.percent(85) {
                    join_authority
                } else {
                    any_wallet
                };
                let grantee = if self.rng.percent(60) {
                    *self.rng.pick(&self.clients.clone())
                } else {
                    self.pool_key()
                };
                Built::one(run.authorize_joiner(&payer, &signer, grantee))
            }
            12 => {
                let signer = if self.rng.percent(85) {
                    join_authority
                } else {
                    any_wallet
                };
                let grantee = *self.rng.pick(&self.clients.clone());
                let spill = self.pool_key();
                Built::one(run.revoke_joiner(&signer, &spill, &grantee))
            }
            13 => {
                let (user, index) = self.client_of(t);
                // mostly the agreed pair (accepted from a Syncing client), else a stale step
                // or another hash (SyncHashMismatch)
                let (sync_step, sync_hash) = match self.rng.below(4) {
                    0 => (self.rng.interesting_u32(), agreed.1),
                    1 => (agreed.0, self.rng.bytes(32).try_into().unwrap()),
                    _ => agreed,
                };
                Built::one(run.synced(&user, index, sync_step, sync_hash))
            }
            14 => {
                let (user, index) = self.client_of(t);
                Built::one(run.resync(&user, index))
            }
            15 => {
                let identity = *self.rng.pick(&self.clients.clone());
                let n = match self.rng.below(5) {
                    0 => 9,
                    1 => 0,
                    _ => self.rng.range(1, 4),
                };
                let delegates = (0..n)
                    .map(|_| *self.rng.pick(&self.clients.clone()))
                    .collect();
                Built::one(run.set_delegates(&any_wallet, &identity, delegates))
            }
            17 => {
                // mostly the current or previous step and a low client index (the fuzzed runs
                // rarely elect verifiers: mostly NotAVerifier, InvalidEvidence), else anything
                let (user, index) = self.client_of(t);
                let ev_step = match self.rng.below(4) {
                    0 => self.rng.interesting_u32(),
                    1 => step.wrapping_sub(1),
                    _ => step,
                };
                let target = if self.rng.percent(80) {
                    self.rng.below(6) as u16
                } else {
                    self.rng.next() as u16
                };
                Built::one(run.evidence(&user, index, ev_step, target))
            }
            _ => {
                // mostly the slot's own identity, else another key (WrongContributor, or no
                // contributor account)
                let (user, index) = self.client_of(t);
                let s = self.state(t);
                let own = s
                    .get()
                    .clients()
                    .get(index as usize)
                    .map(|c| Pubkey::new_from_array(c.identity));
                let identity = match own {
                    Some(id) if self.rng.percent(85) => id,
                    _ => user,
                };
                Built::one(run.settle_points(&any_wallet, index, &identity))
            }
        }
    }

    /// (a) random data, random accounts.
    fn random_ix(&mut self) -> Built {
        let n = self.rng.below(9);
        let accounts = (0..n).map(|_| self.random_meta()).collect();
        let len = self.rng.len(900);
        Built::one(Instruction {
            program_id: PROGRAM_ID,
            accounts,
            data: self.rng.bytes(len),
        })
    }

    /// (b) a valid discriminator, random argument bytes, mostly the instruction's accounts.
    fn discriminated_ix(&mut self) -> Built {
        let which = self.rng.below(self.discs.len());
        let mut data = self.discs[which].to_vec();
        let len = self.rng.len(800);
        data.extend(self.rng.bytes(len));
        if which < KINDS.len() && self.rng.percent(70) {
            let mut b = self.valid(which);
            b.ix.data = data;
            b
        } else {
            let n = self.rng.below(8);
            let accounts = (0..n).map(|_| self.random_meta()).collect();
            Built::one(Instruction {
                program_id: PROGRAM_ID,
                accounts,
                data,
            })
        }
    }

    /// (c) a valid instruction with one to three mutations.
    fn mutated_ix(&mut self) -> Built {
        let kind = self.rng.below(KINDS.len());
        let mut b = self.valid(kind);
        for _ in 0..self.rng.range(1, 3) {
            let ix = &mut b.ix;
            let len = ix.data.len();
            let metas = ix.accounts.len();
            match self.rng.below(11) {
                0 if len > 0 => {
                    let at = self.rng.below(len);
                    ix.data[at] ^= 1 << self.rng.below(8);
                }
                1 if len > 0 => {
                    let at = self.rng.below(len);
                    ix.data[at] = self.rng.next() as u8;
                }
                2 => {
                    let keep = self.rng.below(len + 1);
                    ix.data.truncate(keep);
                }
                3 => {
                    let n = self.rng.range(1, 16);
                    ix.data.extend(self.rng.bytes(n));
                }
                4 if metas > 1 => {
                    let (i, j) = (self.rng.below(metas), self.rng.below(metas));
                    ix.accounts.swap(i, j);
                }
                5 if metas > 0 => {
                    let i = self.rng.below(metas);
                    let key = self.pool_key();
                    ix.accounts[i].pubkey = key;
                    if !self.keys.contains_key(&key) {
                        ix.accounts[i].is_signer = false;
                    }
                }
                6 if metas > 0 => {
                    let i = self.rng.below(metas);
                    ix.accounts[i].is_writable ^= true;
                }
                7 if metas > 0 => {
                    let i = self.rng.below(metas);
                    let m = &mut ix.accounts[i];
                    m.is_signer = !m.is_signer && self.keys.contains_key(&m.pubkey);
                }
                8 if metas > 0 => {
                    let i = self.rng.below(metas);
                    ix.accounts.remove(i);
                }
                9 => {
                    let m = self.random_meta();
                    let at = self.rng.below(metas + 1);
                    ix.accounts.insert(at, m);
                }
                _ if len >= 12 => {
                    // an edge value over an argument (indices, lengths, steps)
                    let at = self.rng.range(8, len - 4);
                    let v = self.rng.interesting_u32();
                    ix.data[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
                _ => {}
            }
        }
        b
    }

    // -------------------------------------------------------------------------- driver

    /// A valid step that moves the live run along (joins, warmup, witnesses, ticks), and
    /// repairs: a closed or finished slot is replaced, a stuck one gets time or a new run.
    fn drive(&mut self) -> Built {
        let s = self.state(0);
        let st = s.get();
        let run = self.slots[0].r.run;
        let authority = self.slots[0].r.authority.pubkey();
        let payer = self.env.payer.pubkey();
        let tick = run.tick(&payer);
        Built::one(match st.run_state() {
            RunState::Uninitialized | RunState::Paused => run.set_paused(&authority, false),
            RunState::Finished => run.free_coordinator(&authority, &payer),
            RunState::WaitingForMembers => {
                let free: Vec<Pubkey> = self.clients[..6]
                    .iter()
                    .filter(|c| st.pending_index(&c.to_bytes()).is_none())
                    .copied()
                    .collect();
                if free.is_empty() || self.rng.percent(30) {
                    tick
                } else {
                    let c = *self.rng.pick(&free);
                    run.join_run(&c, None, c.to_bytes())
                }
            }
            RunState::Warmup => {
                let done: Vec<usize> = st
                    .current_round()
                    .witnesses()
                    .iter()
                    .map(|w| w.index as usize)
                    .collect();
                // Active and WarmingUp clients load the model; syncing ones may not say so
                let todo: Vec<usize> = (0..st.clients().len())
                    .filter(|i| !done.contains(i) && st.clients()[*i].is_training())
                    .collect();
                if todo.is_empty() || self.rng.percent(20) {
                    tick
                } else {
                    let i = *self.rng.pick(&todo);
                    let key = Pubkey::new_from_array(st.clients()[i].signer);
                    run.warmup_witness(&key, i as u32)
                }
            }
            RunState::RoundTrain => {
                let done: Vec<usize> = st
                    .current_round()
                    .witnesses()
                    .iter()
                    .map(|w| w.index as usize)
                    .collect();
                let todo: Vec<usize> = elected_witnesses(st)
                    .into_iter()
                    .filter(|i| !done.contains(i) && st.clients()[*i].is_healthy())
                    .collect();
                // a syncing client (joined mid-epoch) reports the agreed parameters
                let syncing: Vec<usize> = (0..st.clients().len())
                    .filter(|&i| {
                        let c = &st.clients()[i];
                        c.is_healthy() && c.phase() == ClientPhase::Syncing
                    })
                    .collect();
                if !syncing.is_empty() && st.param_step != 0 && self.rng.percent(30) {
                    let i = *self.rng.pick(&syncing);
                    let key = Pubkey::new_from_array(st.clients()[i].signer);
                    run.synced(&key, i as u32, st.param_step, st.param_hash)
                } else if todo.is_empty() || self.rng.percent(20) {
                    tick
                } else {
                    let i = *self.rng.pick(&todo);
                    let key = Pubkey::new_from_array(st.clients()[i].signer);
                    // vouch for every client but, sometimes, one (health checks can succeed)
                    let vouched: Vec<Pubkey> = st
                        .clients()
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| self.rng.percent(90) || *j == i)
                        .map(|(_, c)| Pubkey::new_from_array(c.signer))
                        .collect();
                    run.witness(
                        &key,
                        i as u32,
                        st.header.step,
                        bloom_of(&vouched).to_vec(),
                        vec![0; BLOOM_BYTES],
                        [1; 32],
                        params_at(st.header.step),
                    )
                }
            }
            RunState::RoundWitness => tick,
            RunState::Cooldown => {
                let percent = st.config.checkpointer_percent;
                let cks: Vec<usize> = (0..st.clients().len())
                    .filter(|&i| {
                        st.clients()[i].is_healthy()
                            && committee::is_checkpointer(st.current_round(), percent, i)
                    })
                    .collect();
                if cks.is_empty() || self.rng.percent(60) {
                    tick
                } else {
                    let i = *self.rng.pick(&cks);
                    let key = Pubkey::new_from_array(st.clients()[i].signer);
                    // the epoch's final agreed parameters: recorded, and the Cooldown ends
                    run.checkpoint(
                        &key,
                        i as u32,
                        "org/model",
                        &format!("e{}", st.header.epoch),
                        st.param_step,
                        st.param_hash,
                    )
                }
            }
        })
    }

    /// Replaces the runs that a `free_coordinator` closed.
    fn replace_closed(&mut self) {
        for i in 0..self.slots.len() {
            if self.env.account(&self.slots[i].r.account_key()).is_none() {
                self.slots[i] = self.new_slot(i);
                if i == 2 {
                    self.env.resume(&self.slots[2].r);
                }
            }
        }
    }

    /// Gives a stuck live run time (its tick deadline) or, at last, a new run.
    fn repair(&mut self) {
        let s = self.state(0);
        let mark = mark_of(s.get());
        let slot = &mut self.slots[0];
        if mark != slot.mark {
            slot.mark = mark;
            slot.stale = 0;
            return;
        }
        slot.stale += 1;
        if slot.stale.is_multiple_of(40) {
            if let Some(d) = tick_deadline(s.get()) {
                let d = d as i64;
                if d > self.env.now && d < self.env.now + (1 << 33) {
                    self.env.set_time(d);
                }
            }
        }
        if slot.stale >= 400 {
            // e.g. a fuzzed update set min_clients above the clients we have
            let old = self.slots[0].r.account_key();
            self.others.push(old);
            self.slots[0] = self.new_slot(0);
        }
    }

    // -------------------------------------------------------------------------- sending

    /// The accounts checked around every transaction: each slot's instance and coordinator
    /// account, the blank one.
    fn watched(&self) -> Vec<(Pubkey, bool)> {
        let mut w = vec![];
        for s in &self.slots {
            w.push((s.r.instance(), false));
            w.push((s.r.account_key(), true));
        }
        w.push((self.blank, true));
        w
    }

    /// Signs `b` (fee payer: the first wallet that signs the program instruction, else a
    /// random wallet), sends it on a new slot and checks the outcome.
    fn send(&mut self, b: Built, driver: bool) {
        let mut ixs = b.pre;
        ixs.push(b.ix);
        let program_ix = ixs.len() - 1;
        let fee_payer = ixs[program_ix]
            .accounts
            .iter()
            .find(|m| m.is_signer && self.wallets.contains(&m.pubkey))
            .map(|m| m.pubkey)
            .unwrap_or_else(|| {
                if ixs.len() > 1 {
                    self.env.payer.pubkey() // pays the create_account
                } else {
                    *self.rng.pick(&self.wallets.clone())
                }
            });
        self.env.chain.advance_slot(self.env.now);
        let (hash, _) = self.env.chain.latest_blockhash();
        let msg = Message::new_with_blockhash(&ixs, Some(&fee_payer), &hash);
        let required = msg.header.num_required_signatures as usize;
        let signers: Vec<&Keypair> = msg.account_keys[..required]
            .iter()
            .map(|k| {
                self.keys
                    .get(k)
                    .unwrap_or_else(|| panic!("fuzzer bug: no keypair for signer {k}"))
            })
            .collect();
        let mut tx = Transaction::new_unsigned(msg);
        tx.try_sign(&signers, hash).expect("signers");

        let watched = self.watched();
        let before: Vec<Option<Account>> =
            watched.iter().map(|(k, _)| self.env.account(k)).collect();
        let _ = sbf_heap::take_last();
        let sent = self.env.chain.send(tx.into());
        let heap = sbf_heap::take_last();
        let result = sent.as_ref().map(|_| ()).map_err(|f| f.err.clone());

        let kind = self
            .discs
            .iter()
            .position(|d| ixs[program_ix].data.len() >= 8 && ixs[program_ix].data[..8] == d[..]);
        let label = outcome_label(&result);
        if self.trace == Some(self.iteration) {
            eprintln!(
                "iteration {} ({}): {label}",
                self.iteration,
                if driver { "driver" } else { "fuzz" }
            );
            for ix in &ixs {
                eprintln!("  program {}", ix.program_id);
                for m in &ix.accounts {
                    let s = if m.is_signer { "s" } else { "-" };
                    let w = if m.is_writable { "w" } else { "-" };
                    eprintln!("    {s}{w} {}", m.pubkey);
                }
                eprintln!("    data {}", hex(&ix.data));
            }
            if let Err(f) = &sent {
                eprintln!("  logs:\n    {}", f.meta.logs.join("\n    "));
            }
        }
        self.first_seen
            .entry(label.clone())
            .or_insert((self.iteration, kind));
        if driver {
            self.driver_txs += 1;
            self.driver.add(label.clone());
        } else {
            self.fuzz_txs += 1;
            self.outcomes.add(label.clone());
            let ok = if result.is_ok() { "ok" } else { "refused" };
            self.kinds.add(format!("{:<18} {ok}", kind_name(kind)));
        }
        let mut checked = self.check(&ixs[program_ix], kind, &result, &watched, &before);
        if let (Some(m), Ok(())) = (heap, &checked) {
            let deserialize = anchor_lang::error::ErrorCode::InstructionDidNotDeserialize;
            if m.used >= sbf_heap::USABLE {
                // on SBF: out of memory. Only borsh's preallocation for a `Vec<u8>`/`String`
                // length prefix gets there (see heap.rs); anything else is a finding.
                self.over_heap += 1;
                self.over_heap_first.get_or_insert(self.iteration);
                let code = deserialize as u32;
                let refused = matches!(
                    result,
                    Err(TransactionError::InstructionError(_, InstructionError::Custom(c)))
                        if c == code
                );
                if !refused {
                    checked = Err(format!(
                        "{} bytes of SBF heap and not a deserialization failure",
                        m.used
                    ));
                }
            } else if result.is_ok() || label.starts_with("Custom(6") {
                let max = self.heap_max.entry(kind_name(kind)).or_default();
                *max = (*max).max(m.used);
            }
        }
        if let Err(e) = checked {
            panic!(
                "seed {:#x} iteration {} ({}): {e}\ninstruction: {:?}\noutcome: {label}",
                self.seed,
                self.iteration,
                if driver { "driver" } else { "fuzz" },
                ixs[program_ix]
            );
        }
        self.replace_closed();
        if result.is_ok() && kind == Some(INIT) {
            if let Some(m) = ixs[program_ix].accounts.get(2) {
                if !self.others.contains(&m.pubkey) && m.pubkey != self.blank {
                    self.others.push(m.pubkey);
                }
            }
        }
    }

    fn check(
        &mut self,
        ix: &Instruction,
        kind: Option<usize>,
        result: &Result<(), TransactionError>,
        watched: &[(Pubkey, bool)],
        before: &[Option<Account>],
    ) -> Result<(), String> {
        if let Err(TransactionError::InstructionError(
            _,
            InstructionError::ProgramFailedToComplete,
        )) = result
        {
            return Err("the program panicked (ProgramFailedToComplete)".into());
        }
        let now = self.env.now;
        for ((key, coordinator), b) in watched.iter().zip(before) {
            let a = self.env.account(key);
            match (b, &a) {
                (None, None) => {}
                (None, Some(_)) => return Err(format!("{key} appeared")),
                (Some(b), None) => {
                    // only a successful free of a halted run closes it
                    let freed = result.is_ok()
                        && kind == Some(FREE)
                        && ix.accounts.iter().any(|m| m.pubkey == *key);
                    if !freed {
                        return Err(format!("{key} vanished without a free_coordinator"));
                    }
                    if *coordinator {
                        let s = StateBuf::from_account_data(&b.data);
                        if !s.get().run_state().halted() {
                            return Err(format!("{key} freed while running"));
                        }
                    }
                }
                (Some(b), Some(a)) => {
                    if result.is_err() && b != a {
                        return Err(format!(
                            "{key} changed by a failed transaction (byte {:?})",
                            first_difference(&b.data, &a.data)
                        ));
                    }
                    if a.owner != PROGRAM_ID || a.data.len() != b.data.len() {
                        return Err(format!("{key}: owner or size changed"));
                    }
                    if !coordinator {
                        if a.data != b.data {
                            return Err(format!("instance {key} was modified"));
                        }
                        CoordinatorInstance::try_deserialize(&mut &a.data[..])
                            .map_err(|e| format!("instance {key}: {e}"))?;
                        continue;
                    }
                    if a.data.len() != CoordinatorAccount::SPACE {
                        return Err(format!("{key}: size {}", a.data.len()));
                    }
                    let (bd, ad) = (&b.data[..8], &a.data[..8]);
                    let initialized = ad == CoordinatorAccount::DISCRIMINATOR;
                    if bd == CoordinatorAccount::DISCRIMINATOR && !initialized {
                        return Err(format!("{key}: discriminator changed"));
                    }
                    if !initialized {
                        if a.data.iter().any(|&x| x != 0) {
                            return Err(format!("{key}: blank account written"));
                        }
                        continue;
                    }
                    // bytes already checked need no second look (most transactions fail)
                    if self.validated.get(key) == Some(&a.data) {
                        continue;
                    }
                    let s = StateBuf::from_account_data(&a.data);
                    check_state(s.get(), now).map_err(|e| format!("{key}: {e}"))?;
                    if bd == CoordinatorAccount::DISCRIMINATOR {
                        let old = StateBuf::from_account_data(&b.data);
                        if old.get().header.run_id != s.get().header.run_id {
                            return Err(format!("{key}: run id changed"));
                        }
                    }
                    self.validated.insert(*key, a.data.clone());
                }
            }
        }
        Ok(())
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn kind_name(kind: Option<usize>) -> &'static str {
    match kind {
        Some(k) if k < KINDS.len() => KINDS[k],
        Some(_) => "anchor IDL tag",
        None => "no discriminator",
    }
}

// ------------------------------------------------------------------------------ invariants

fn valid_fixed(raw: &[u8], max: usize) -> bool {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    let used = &raw[..end];
    raw.len() == max && !used.contains(&0) && std::str::from_utf8(used).is_ok()
}

fn zero<T: bytemuck::Pod>(v: &T) -> bool {
    static ZEROS: [u8; 1024] = [0; 1024];
    let b = bytemuck::bytes_of(v);
    b == &ZEROS[..b.len()] // a memcmp: fast in the debug profile too
}

/// The canonical state's rules (`state.rs`, `coordinator.rs`): enums in range, lengths in
/// bounds, unused slots all zero, unique signers and witnesses, participants among the
/// clients, bloom padding clear, times not in the future; then the core's own read-only
/// functions must not panic on it.
/// The first `n` slots are clients in an allowed state, zero-padded, each signer once; the rest
/// are all zero.
fn check_slots(
    name: &str,
    slots: &[Client],
    n: usize,
    state_ok: impl Fn(u8) -> bool,
) -> Result<(), String> {
    for (i, c) in slots.iter().enumerate() {
        if i >= n {
            if !zero(c) {
                return Err(format!("unused {name} slot {i} not zero"));
            }
        } else if !state_ok(c.state) {
            return Err(format!("{name} {i} state {}", c.state));
        } else if ClientPhase::from_u8(c.phase).is_none() {
            return Err(format!("{name} {i} phase {}", c.phase));
        } else if c._pad != [0; 2] {
            return Err(format!("{name} {i} padding"));
        } else if slots[..i].iter().any(|o| o.signer == c.signer) {
            return Err(format!("{name} {i} signer twice"));
        }
    }
    Ok(())
}

fn check_state(s: &CoordinatorState, now: i64) -> Result<(), String> {
    macro_rules! ensure {
        ($c:expr, $($m:tt)*) => {
            if !$c {
                return Err(format!($($m)*));
            }
        };
    }
    let h = &s.header;
    let st = RunState::from_u8(h.run_state);
    ensure!(st.is_some(), "run_state byte {}", h.run_state);
    let st = st.unwrap();
    let kind = CheckpointKind::from_u8(h.checkpoint_kind);
    ensure!(kind.is_some(), "checkpoint_kind byte {}", h.checkpoint_kind);
    ensure!(s.config.validate().is_ok(), "invalid config {:?}", s.config);
    ensure!(
        h.layout_version == LAYOUT_VERSION,
        "layout version {}",
        h.layout_version
    );
    ensure!(s._hashes_pad == [0; 4], "hashes padding");
    ensure!(s.config._pad == [0; 1], "config padding");
    ensure!(
        s.pending()
            .iter()
            .all(|p| p.presence == 0 && p.sequences == 0),
        "points in a pending entry"
    );
    ensure!(
        s.pending().iter().all(|p| p.accusers == [0; 32]),
        "accusers in a pending entry"
    );
    ensure!(
        s.clients().iter().all(|c| {
            let n = h.clients_len as usize;
            (n..MAX_CLIENTS).all(|i| (c.accusers[i / 8] >> (i % 8)) & 1 == 0)
        }),
        "an accuser past the clients"
    );
    ensure!(
        s.clients()
            .iter()
            .all(|c| c.state != ClientState::Evicted as u8 || !c.unsettled()),
        "points in an evicted slot"
    );
    ensure!(
        s.param_step <= h.step && s.due_step <= s.param_step,
        "agreed steps {} {} at step {}",
        s.due_step,
        s.param_step,
        h.step
    );
    ensure!(
        (s.param_step == 0) == (s.param_hash == [0; 32])
            && (s.due_step == 0) == (s.due_hash == [0; 32]),
        "an agreed hash without its step, or a step without its hash"
    );
    ensure!(h.first_round <= 1 && h.pending_pause <= 1, "flags");
    ensure!(
        h.pending_pause == 0 || st.active(),
        "pending pause in {st:?}"
    );
    ensure!(h.step >= 1, "step 0");
    ensure!(
        (h.rounds_head as usize) < NUM_STORED_ROUNDS,
        "rounds_head {}",
        h.rounds_head
    );
    ensure!(h.run_state_start as i64 <= now, "state start in the future");
    ensure!(
        h.epoch_start_timestamp as i64 <= now,
        "epoch start in the future"
    );
    ensure!(
        valid_fixed(&h.run_id, RUN_ID_LEN) && !s.run_id().is_empty(),
        "run id {:?}",
        h.run_id
    );
    ensure!(
        valid_fixed(&s.checkpoint_repo, REPO_LEN) && valid_fixed(&s.checkpoint_revision, REPO_LEN),
        "checkpoint strings"
    );
    ensure!(
        kind != Some(CheckpointKind::Hub) || !s.repo().is_empty(),
        "Hub checkpoint without a repo"
    );
    ensure!(
        kind != Some(CheckpointKind::Stored)
            || (!s.repo().is_empty() && s.checkpoint_hash != [0; 32]),
        "Stored checkpoint without a repo or hash"
    );
    let (nc, np) = (h.clients_len as usize, h.pending_len as usize);
    ensure!(nc <= MAX_CLIENTS && np <= MAX_CLIENTS, "lengths {nc} {np}");
    check_slots("client", &s.clients, nc, |st| {
        st <= ClientState::Evicted as u8
    })?;
    check_slots("pending", &s.pending, np, |st| {
        st == ClientState::Healthy as u8
    })?;
    ensure!(
        s.pending().iter().all(|p| p.phase == 0 && p.since == 0),
        "a pending entry with a phase"
    );
    ensure!(
        s.clients().iter().all(|c| c.since <= h.step),
        "a client phase that begins after the current step"
    );
    for (k, r) in s.rounds.iter().enumerate() {
        let nw = r.witnesses_len as usize;
        ensure!(nw <= MAX_WITNESSES, "round {k}: {nw} witnesses");
        ensure!(
            r.participant_count as usize == r.participant_total(),
            "round {k}: participant count"
        );
        ensure!(
            (nc..MAX_CLIENTS).all(|i| !r.is_participant(i)),
            "round {k}: a participant past the clients"
        );
        ensure!(
            r.warming
                .iter()
                .zip(&r.participants)
                .all(|(w, p)| w & !p == 0),
            "round {k}: a warming client that is no participant"
        );
        for (j, w) in r.witnesses.iter().enumerate() {
            if j < nw {
                ensure!(
                    (w.index as usize) < nc,
                    "round {k} witness {j}: index {}",
                    w.index
                );
                ensure!(w._pad == [0; 6], "round {k} witness {j}: padding");
                ensure!(
                    !r.witnesses[..j].iter().any(|o| o.index == w.index),
                    "round {k}: witness {} twice",
                    w.index
                );
                for bloom in [&w.participant_bloom, &w.broadcast_bloom] {
                    ensure!(
                        bloom[BLOOM_BITS / 8..].iter().all(|&b| b == 0),
                        "round {k} witness {j}: bloom padding"
                    );
                }
            } else {
                ensure!(zero(w), "round {k}: unused witness slot {j} not zero");
            }
        }
    }
    // the core's readers on this state
    let _ = tick_deadline(s);
    for i in 0..nc {
        let _ = is_healthy(s, i);
    }
    let mut out = [0u8; MAX_CLIENTS];
    let _ = committee::witnesses(s.current_round(), s.config.witness_nodes, &mut out);
    let _ = key_hex(&[0; 32]);
    Ok(())
}

// ------------------------------------------------------------------------------ the test

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        }
        Err(_) => default,
    }
}

#[test]
fn fuzz_instructions_through_the_runtime() {
    let seed = env_number("PSYCHE_FUZZ_SEED", DEFAULT_SEED);
    let target = env_number("PSYCHE_FUZZ_TXS", DEFAULT_TXS as u64) as usize;
    println!("fuzz seed {seed:#x} (PSYCHE_FUZZ_SEED), {target} random instructions");
    // the program's `msg!` prints natively: keep --nocapture output to the summary
    let quiet = QuietStdout::new();
    let started = Instant::now();
    let mut f = Fuzz::new(seed);
    while f.fuzz_txs < target {
        f.iteration += 1;
        // the clock: mostly a second at a time
        if f.rng.percent(40) {
            let dt = if f.rng.percent(3) {
                f.rng.range(5, 30)
            } else {
                1
            };
            let t = f.env.now + dt as i64;
            f.env.set_time(t);
        }
        f.repair();
        if f.rng.percent(35) {
            let b = f.drive();
            f.send(b, true);
        }
        let (category, b) = match f.rng.below(100) {
            0..=29 => ("(a) random data and accounts", f.random_ix()),
            30..=54 => ("(b) discriminator + random args", f.discriminated_ix()),
            55..=89 => ("(c) mutated valid instruction", f.mutated_ix()),
            _ => {
                let k = f.rng.below(KINDS.len());
                ("(d) generated valid instruction", f.valid(k))
            }
        };
        f.categories.add(category.to_string());
        f.send(b, false);
        let st = f.state(0).get().run_state();
        f.states.add(st.name().to_string());
    }
    let elapsed = started.elapsed();
    drop(quiet);

    // every other coordinator account made along the way still decodes
    for key in f.others.clone() {
        if let Some(a) = f.env.account(&key) {
            if a.owner == PROGRAM_ID
                && a.data.len() == CoordinatorAccount::SPACE
                && a.data[..8] == *CoordinatorAccount::DISCRIMINATOR
            {
                let s = StateBuf::from_account_data(&a.data);
                check_state(s.get(), f.env.now)
                    .unwrap_or_else(|e| panic!("seed {seed:#x}, account {key}: {e}"));
            }
        }
    }

    println!(
        "{} random transactions + {} driver transactions in {:.1?} ({} iterations, seed {seed:#x})",
        f.fuzz_txs, f.driver_txs, elapsed, f.iteration
    );
    f.categories.print("categories:");
    f.outcomes.print("outcomes of the random transactions:");
    f.kinds.print("by discriminator:");
    f.driver.print("outcomes of the driver's transactions:");
    f.states.print("live run state after each iteration:");
    println!("modelled SBF heap, largest per instruction kind (accepted or refused by a handler):");
    for (kind, used) in &f.heap_max {
        println!("  {kind:<18} {used:>6} bytes");
    }
    println!(
        "  over the {}-byte heap (borsh length prefixes, InstructionDidNotDeserialize natively, \
         out of memory on SBF): {} transactions, first at iteration {:?}",
        sbf_heap::HEAP,
        f.over_heap,
        f.over_heap_first
    );
    println!("first occurrence of each outcome (PSYCHE_FUZZ_TRACE=<iteration> shows it):");
    for (label, (it, kind)) in &f.first_seen {
        println!("  {label:<45} iteration {it:>6}  {}", kind_name(*kind));
    }
    let s = f.state(0);
    println!(
        "live run: generation {}, epoch {}, step {}; other coordinator accounts {}",
        f.generation,
        s.get().header.epoch,
        s.get().header.step,
        f.others.len()
    );

    assert!(f.fuzz_txs >= target);
    assert!(!sbf_heap::overflowed(), "heap tracker overflow");
    for (kind, used) in &f.heap_max {
        assert!(*used < sbf_heap::USABLE, "{kind}: {used} bytes of SBF heap");
    }
    // the live run went through its phases while being fuzzed
    for st in ["Warmup", "RoundTrain", "RoundWitness", "Cooldown"] {
        assert!(
            f.states.0.get(st).copied().unwrap_or(0) > 0,
            "the live run never was in {st}"
        );
    }
    // and the random instructions reached the handlers: the core's and the program's errors
    let handler_errors: usize = f
        .outcomes
        .0
        .iter()
        .filter(|(k, _)| k.starts_with("Custom(60") || k.starts_with("Custom(61"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        handler_errors > target / 20,
        "only {handler_errors} refusals by the handlers"
    );
}

#[test]
fn the_slot_check_names_each_fault() {
    let ok = |st: u8| st == ClientState::Healthy as u8;
    let client = |k: u8| Client {
        signer: [k; 32],
        state: ClientState::Healthy as u8,
        ..bytemuck::Zeroable::zeroed()
    };
    let good = [client(1), client(2), bytemuck::Zeroable::zeroed()];
    assert_eq!(check_slots("pending", &good, 2, ok), Ok(()));
    let fault = |f: &dyn Fn(&mut [Client; 3])| {
        let mut s = good;
        f(&mut s);
        check_slots("pending", &s, 2, ok).unwrap_err()
    };
    assert_eq!(fault(&|s| s[2].state = 1), "unused pending slot 2 not zero");
    assert_eq!(fault(&|s| s[1].state = 9), "pending 1 state 9");
    assert_eq!(fault(&|s| s[0]._pad[1] = 1), "pending 0 padding");
    assert_eq!(fault(&|s| s[1].phase = 4), "pending 1 phase 4");
    assert_eq!(fault(&|s| s[1].signer = [1; 32]), "pending 1 signer twice");
}
