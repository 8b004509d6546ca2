//! The local chain: a LiteSVM bank with the coordinator program registered as a native builtin,
//! plus what a validator adds around a bank: slots that advance with wall-clock time, a window
//! of recent blockhashes a transaction may use, and the status of every recent transaction.

use std::collections::{HashMap, VecDeque};

use litesvm::types::{FailedTransactionMetadata, TransactionMetadata};
use litesvm::LiteSVM;
use solana_account::{Account, ReadableAccount};
use solana_clock::Clock;
use solana_hash::Hash;
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

use crate::history::{self, History, TxEntry};
use crate::ledger::Ledger;
use crate::native;

solana_program_runtime::declare_process_instruction!(CoordinatorBuiltin, 1, |invoke_context| {
    native::run_entry(invoke_context, psyche_coordinator::entry)
});

/// Registers `builtin` as the coordinator program (`CoordinatorBuiltin::vm`, or a test's
/// instrumented variant).
pub fn register_program(
    svm: &mut LiteSVM,
    builtin: solana_program_runtime::invoke_context::BuiltinFunctionWithContext,
) {
    svm.add_builtin(psyche_coordinator::ID, builtin);
    // litesvm <= 0.11 makes a builtin's account owned by the BPF loader, which then cannot
    // run it; owned by the native loader the runtime dispatches to the builtin.
    let account = Account {
        lamports: 1,
        data: vec![0],
        owner: solana_sdk_ids::native_loader::ID,
        executable: true,
        rent_epoch: 0,
    };
    svm.set_account(psyche_coordinator::ID, account)
        .expect("registering the coordinator program");
}

/// How many recent blockhashes stay valid (a validator's 150 slots, ~1 minute at 400 ms).
pub const BLOCKHASH_WINDOW: usize = 150;
/// Slots in an epoch (mainnet's).
pub const SLOTS_PER_EPOCH: u64 = 432_000;
/// The fee per signature: LiteSVM's default fee structure (the bank charges it, this names it
/// for `getTransaction`'s `meta.fee`; a test checks it against a failed transaction's payer).
pub const LAMPORTS_PER_SIGNATURE: u64 = 5000;

/// What the chain remembers of a processed transaction for its status window (its logs and the
/// rest are in the history, `history.rs`).
#[derive(Clone, Debug)]
pub struct TxRecord {
    pub slot: u64,
    pub err: Option<TransactionError>,
    /// The writable accounts of the transaction (their subscribers are notified).
    pub writable: Vec<Pubkey>,
}

pub struct LocalChain {
    pub svm: LiteSVM,
    slot: u64,
    genesis: Hash,
    blockhashes: VecDeque<(Hash, u64)>,
    records: HashMap<Signature, TxRecord>,
    /// Signatures in arrival order with their slot, to forget old records.
    order: VecDeque<(Signature, u64)>,
    transaction_count: u64,
    ledger: Option<Ledger>,
    pub history: History,
}

impl LocalChain {
    /// A chain at slot 0 whose clock reads `unix_timestamp`.
    pub fn new(unix_timestamp: i64) -> Self {
        native::install_stubs();
        // Our own window of valid blockhashes replaces LiteSVM's latest-only check.
        let mut svm = LiteSVM::new().with_blockhash_check(false);
        register_program(&mut svm, CoordinatorBuiltin::vm);
        let genesis = svm.latest_blockhash();
        let mut chain = Self {
            svm,
            slot: 0,
            genesis,
            blockhashes: VecDeque::from([(genesis, 0)]),
            records: HashMap::new(),
            order: VecDeque::new(),
            transaction_count: 0,
            ledger: None,
            history: History::default(),
        };
        chain.set_clock(unix_timestamp);
        chain
    }

    /// Runs the coordinator from an SBF build (`scripts/build-sbf`) under the VM, metered,
    /// in place of the native builtin. LiteSVM takes any bytes and fails each call later, so
    /// the ELF is tried first: an instruction without data must reach Anchor's dispatch and
    /// be refused there (`InstructionFallbackNotFound`), else the reason and the log.
    pub fn load_program_elf(&mut self, elf: &[u8]) -> Result<(), String> {
        const INSTRUCTION_FALLBACK_NOT_FOUND: u32 = 101; // anchor_lang::error::ErrorCode
        self.svm
            .add_program(psyche_coordinator::ID, elf)
            .map_err(|e| {
                format!("the runtime (agave 2.3) cannot load it as an SBPF v0 program: {e:?}")
            })?;
        // a payer for the one simulated call, there only while it runs
        let payer = solana_keypair::Keypair::new();
        let funded = Account {
            lamports: 1_000_000_000,
            ..Account::default()
        };
        self.svm
            .set_account(payer.pubkey(), funded)
            .map_err(|e| format!("{e:?}"))?;
        let ix = solana_instruction::Instruction {
            program_id: psyche_coordinator::ID,
            accounts: vec![solana_instruction::AccountMeta::new(payer.pubkey(), true)],
            data: vec![],
        };
        let tx = solana_transaction::Transaction::new(
            &[&payer],
            solana_message::Message::new(&[ix], Some(&payer.pubkey())),
            self.svm.latest_blockhash(),
        );
        let outcome = self.svm.simulate_transaction(tx);
        self.svm
            .set_account(payer.pubkey(), Account::default())
            .map_err(|e| format!("{e:?}"))?;
        match outcome {
            Err(f)
                if f.err
                    == TransactionError::InstructionError(
                        0,
                        solana_instruction::error::InstructionError::Custom(
                            INSTRUCTION_FALLBACK_NOT_FOUND,
                        ),
                    ) =>
            {
                Ok(())
            }
            Err(f) => Err(format!(
                "the ELF does not run: {:?}\n{}",
                f.err,
                f.meta.logs.join("\n")
            )),
            Ok(_) => Err("the ELF accepted an instruction without data".into()),
        }
    }

    /// A chain that keeps its accounts in the ledger in `dir`: what an earlier chain with the
    /// same directory committed is there again, and the slots go on from its last one.
    pub fn with_ledger(unix_timestamp: i64, dir: &std::path::Path) -> std::io::Result<Self> {
        let mut chain = Self::new(unix_timestamp);
        let (ledger, replayed) = Ledger::open(dir)?;
        for (key, account) in replayed.accounts {
            if let Some(account) = account {
                chain
                    .svm
                    .set_account(key, account)
                    .map_err(|e| std::io::Error::other(format!("ledger account {key}: {e:?}")))?;
            }
        }
        // Blockhashes follow from the genesis one, slot by slot: go past the last one the
        // earlier chain handed out, so that none of its transactions can be replayed (their
        // statuses were not kept).
        for _ in 0..=replayed.slot {
            chain.svm.expire_blockhash();
        }
        chain.slot = replayed.slot + 1;
        chain.blockhashes = VecDeque::from([(chain.svm.latest_blockhash(), chain.slot)]);
        chain.set_clock(unix_timestamp);
        chain.ledger = Some(ledger);
        chain.history = History::open(dir, history::LIMIT)?;
        Ok(chain)
    }

    /// Writes the current value of `keys` to the ledger, if there is one. A ledger that
    /// cannot be written is reported and the chain goes on (a dev chain should not stop).
    fn persist(&mut self, keys: &[Pubkey]) {
        if self.ledger.is_none() {
            return; // (reading the accounts copies the 187 KB coordinator account)
        }
        let accounts: Vec<_> = keys.iter().map(|k| (*k, self.get_account(k))).collect();
        if let Some(ledger) = self.ledger.as_mut() {
            if let Err(e) = ledger.record(self.slot, &accounts) {
                eprintln!(
                    "psyche-localnet: ledger: cannot record slot {}: {e}",
                    self.slot
                );
            }
        }
    }

    pub fn slot(&self) -> u64 {
        self.slot
    }

    pub fn genesis_hash(&self) -> Hash {
        self.genesis
    }

    pub fn transaction_count(&self) -> u64 {
        self.transaction_count
    }

    /// The newest blockhash and the last block height at which it is still valid.
    pub fn latest_blockhash(&self) -> (Hash, u64) {
        let (hash, slot) = *self.blockhashes.back().expect("never empty");
        (hash, slot + BLOCKHASH_WINDOW as u64)
    }

    pub fn is_blockhash_valid(&self, hash: &Hash) -> bool {
        self.blockhashes.iter().any(|(h, _)| h == hash)
    }

    /// Sets the Clock's time without starting a new slot.
    pub fn set_clock(&mut self, unix_timestamp: i64) {
        let clock = Clock {
            slot: self.slot,
            epoch_start_timestamp: unix_timestamp,
            epoch: self.slot / SLOTS_PER_EPOCH,
            leader_schedule_epoch: self.slot / SLOTS_PER_EPOCH + 1,
            unix_timestamp,
        };
        self.svm.set_sysvar(&clock);
    }

    pub fn clock(&self) -> Clock {
        self.svm.get_sysvar::<Clock>()
    }

    /// Starts the next slot at `unix_timestamp`: a new blockhash, the oldest one expires.
    pub fn advance_slot(&mut self, unix_timestamp: i64) {
        self.slot += 1;
        self.svm.expire_blockhash();
        self.blockhashes
            .push_back((self.svm.latest_blockhash(), self.slot));
        while self.blockhashes.len() > BLOCKHASH_WINDOW {
            self.blockhashes.pop_front();
        }
        self.set_clock(unix_timestamp);
        self.sync_ledger();
        // Statuses are kept as long as their blockhash could still be used (and a bit more).
        let horizon = self.slot.saturating_sub(2 * BLOCKHASH_WINDOW as u64);
        while let Some((sig, slot)) = self.order.front().copied() {
            if slot >= horizon {
                break;
            }
            self.order.pop_front();
            self.records.remove(&sig);
        }
    }

    /// Once a slot: make the ledger and the history durable, and compact the ledger when it
    /// has grown.
    fn sync_ledger(&mut self) {
        if let Err(e) = self.history.sync() {
            eprintln!("psyche-localnet: history: cannot sync: {e}");
        }
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        let result = if ledger.needs_compaction() {
            let keys: Vec<Pubkey> = ledger.keys().copied().collect();
            let accounts: Vec<_> = keys
                .iter()
                .map(|k| (*k, self.svm.get_account(k).filter(|a| a.lamports > 0)))
                .collect();
            let ledger = self.ledger.as_mut().expect("checked above");
            ledger.rewrite(self.slot, &accounts)
        } else {
            ledger.sync()
        };
        if let Err(e) = result {
            eprintln!("psyche-localnet: ledger: cannot sync: {e}");
        }
    }

    pub fn get_account(&self, key: &Pubkey) -> Option<Account> {
        self.svm.get_account(key).filter(|a| a.lamports > 0)
    }

    /// Every live account owned by `owner` that passes `keep`, in address order
    /// (`getProgramAccounts`).
    pub fn program_accounts(
        &self,
        owner: &Pubkey,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Vec<(Pubkey, Account)> {
        let mut out: Vec<(Pubkey, Account)> = self
            .svm
            .accounts_db()
            .inner
            .iter()
            .filter(|(_, a)| a.owner() == owner && a.lamports() > 0 && keep(a.data()))
            .map(|(k, a)| (*k, Account::from(a.clone())))
            .collect();
        out.sort_by_key(|(k, _)| *k);
        out
    }

    pub fn record(&self, sig: &Signature) -> Option<&TxRecord> {
        self.records.get(sig)
    }

    /// Checks a transaction as a validator's front door does before executing it (the
    /// blockhash too unless a simulation replaces it).
    fn admit(&self, tx: &VersionedTransaction, blockhash: bool) -> Result<(), TransactionError> {
        // before anything reads the first signature (a simulation without any panicked here)
        let Some(first) = tx.signatures.first() else {
            return Err(TransactionError::SanitizeFailure);
        };
        if blockhash && !self.is_blockhash_valid(tx.message.recent_blockhash()) {
            return Err(TransactionError::BlockhashNotFound);
        }
        if self.records.contains_key(first) {
            return Err(TransactionError::AlreadyProcessed);
        }
        Ok(())
    }

    /// Executes without committing anything. `checks` are what the RPC's simulation config
    /// leaves on: signatures (`sigVerify`, off by default in `simulateTransaction`, as on a
    /// validator, so that clients can simulate before signing) and the blockhash (off with
    /// `replaceRecentBlockhash`).
    pub fn simulate(
        &mut self,
        tx: VersionedTransaction,
        checks: SimulationChecks,
    ) -> Result<TransactionMetadata, FailedTransactionMetadata> {
        if let Err(err) = self.admit(&tx, checks.blockhash) {
            return Err(FailedTransactionMetadata {
                err,
                meta: Default::default(),
            });
        }
        with_sigverify(&mut self.svm, checks.signatures, |svm| {
            svm.simulate_transaction(tx).map(|info| info.meta)
        })
    }

    /// `simulate` with the signatures checked only if `Checked::verify` could not verify them.
    pub fn simulate_checked(
        &mut self,
        tx: Checked,
        blockhash: bool,
    ) -> Result<TransactionMetadata, FailedTransactionMetadata> {
        let checks = SimulationChecks {
            signatures: !tx.verified,
            blockhash,
        };
        self.simulate(tx.tx, checks)
    }

    /// Executes and commits. A transaction that fails after its signatures and blockhash were
    /// accepted still lands (the fee is charged, nothing else changes) and gets a status.
    pub fn send(
        &mut self,
        tx: VersionedTransaction,
    ) -> Result<TransactionMetadata, FailedTransactionMetadata> {
        self.execute(tx, true)
    }

    /// `send` with the signatures checked only if `Checked::verify` could not verify them.
    pub fn send_checked(
        &mut self,
        tx: Checked,
    ) -> Result<TransactionMetadata, FailedTransactionMetadata> {
        self.execute(tx.tx, !tx.verified)
    }

    fn execute(
        &mut self,
        tx: VersionedTransaction,
        signatures: bool,
    ) -> Result<TransactionMetadata, FailedTransactionMetadata> {
        if let Err(err) = self.admit(&tx, true) {
            return Err(FailedTransactionMetadata {
                err,
                meta: Default::default(),
            });
        }
        let sig = tx.signatures[0];
        let keys = tx.message.static_account_keys().to_vec();
        let writable: Vec<Pubkey> = keys
            .iter()
            .enumerate()
            .filter(|(i, _)| tx.message.is_maybe_writable(*i, None))
            .map(|(_, k)| *k)
            .collect();
        let balances = |svm: &LiteSVM| -> Vec<u64> {
            keys.iter()
                .map(|k| svm.get_balance(k).unwrap_or(0))
                .collect()
        };
        let pre_balances = balances(&self.svm);
        // (a test's bank may have its own check off: it stays so)
        let on = self.svm.get_sigverify() && signatures;
        let result = with_sigverify(&mut self.svm, on, |svm| svm.send_transaction(tx.clone()));
        // Errors found before execution (bad signature, unknown account) do not land.
        let landed = self.svm.get_transaction(&sig).is_some();
        if landed {
            let written: Vec<Pubkey> = writable_keys(&result, &writable);
            self.persist(&written);
            let (err, meta) = match &result {
                Ok(meta) => (None, meta),
                Err(f) => (Some(f.err.clone()), &f.meta),
            };
            let (parent_slot, previous_blockhash) = self
                .history
                .parent_of(self.slot)
                .unwrap_or((0, self.genesis));
            let entry = TxEntry {
                slot: self.slot,
                block_time: self.clock().unix_timestamp,
                blockhash: self.latest_blockhash().0,
                parent_slot,
                previous_blockhash,
                fee: LAMPORTS_PER_SIGNATURE * tx.signatures.len() as u64,
                post_balances: balances(&self.svm),
                pre_balances,
                tx,
                err: err.clone(),
                logs: meta.logs.clone(),
                inner: meta.inner_instructions.clone(),
                return_data: (!meta.return_data.data.is_empty())
                    .then(|| (meta.return_data.program_id, meta.return_data.data.clone())),
                units: meta.compute_units_consumed,
            };
            if let Err(e) = self.history.record(entry) {
                eprintln!("psyche-localnet: history: cannot record {sig}: {e}");
            }
            self.records.insert(
                sig,
                TxRecord {
                    slot: self.slot,
                    err,
                    writable,
                },
            );
            self.order.push_back((sig, self.slot));
            self.transaction_count += 1;
        }
        result
    }

    /// Credits `lamports` to `to` from the chain's faucet.
    pub fn airdrop(&mut self, to: &Pubkey, lamports: u64) -> Result<Signature, TransactionError> {
        // The faucet transfer must use a blockhash of our window.
        let result = self.svm.airdrop(to, lamports);
        match result {
            Ok(meta) => {
                self.persist(&[*to]);
                self.records.insert(
                    meta.signature,
                    TxRecord {
                        slot: self.slot,
                        err: None,
                        writable: vec![*to],
                    },
                );
                self.order.push_back((meta.signature, self.slot));
                self.transaction_count += 1;
                Ok(meta.signature)
            }
            Err(f) => Err(f.err),
        }
    }
}

/// A transaction whose signatures were checked before the chain's lock: the RPC verifies
/// them first, so that the front-end threads verify in parallel while one of them executes
/// (a validator's sigverify stage runs ahead of its bank the same way), and the bank skips its
/// own check for one that passed (half of a transfer's CPU, under the lock).
#[derive(Clone)]
pub struct Checked {
    tx: VersionedTransaction,
    /// Every signature verified and their number the one the message requires. When not, the
    /// bank checks the transaction itself, so it fails as it always did, with the bank's
    /// error (a malformed transaction's sanitize error comes before a bad signature's).
    verified: bool,
}

impl Checked {
    pub fn verify(tx: VersionedTransaction) -> Self {
        let required = usize::from(tx.message.header().num_required_signatures);
        let verified = required > 0
            && tx.signatures.len() == required
            && crate::sigverify::all_verify(&tx.signatures, &tx.message);
        Self { tx, verified }
    }

    pub fn transaction(&self) -> &VersionedTransaction {
        &self.tx
    }
}

/// What a simulation checks before it executes (a preflight checks both).
#[derive(Clone, Copy, Debug)]
pub struct SimulationChecks {
    pub signatures: bool,
    pub blockhash: bool,
}

impl SimulationChecks {
    pub const ALL: Self = Self {
        signatures: true,
        blockhash: true,
    };
}

/// Runs `f` on the bank with its signature checks `on`, then as they were.
fn with_sigverify<R>(svm: &mut LiteSVM, on: bool, f: impl FnOnce(&mut LiteSVM) -> R) -> R {
    let before = svm.get_sigverify();
    set_sigverify(svm, on);
    let result = f(svm);
    set_sigverify(svm, before);
    result
}

/// LiteSVM switches signature checks only by value (`with_sigverify`); this switches the
/// bank's in place.
fn set_sigverify(svm: &mut LiteSVM, on: bool) {
    if svm.get_sigverify() == on {
        return;
    }
    // SAFETY: `with_sigverify` only assigns a bool and returns its argument, so nothing can
    // unwind between the read and the write: `svm` is never left moved-from or dropped twice.
    unsafe {
        let bank = std::ptr::read(svm);
        std::ptr::write(svm, bank.with_sigverify(on));
    }
}

/// The accounts a landed transaction may have changed: its writable accounts, or only the fee
/// payer when it failed (a failed transaction still pays its fee).
fn writable_keys(
    result: &Result<TransactionMetadata, FailedTransactionMetadata>,
    writable: &[Pubkey],
) -> Vec<Pubkey> {
    match result {
        Ok(_) => writable.to_vec(),
        Err(_) => writable.iter().take(1).copied().collect(),
    }
}
