//! The node: the chain behind a lock, its subscribers, and the slot clock.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use litesvm::types::{FailedTransactionMetadata, TransactionMetadata};
use serde_json::Value;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

use crate::chain::{Checked, LocalChain, SimulationChecks};
use crate::json;
use crate::subscriptions::Subscriptions;

/// A slot every 400 ms, as on mainnet.
pub const SLOT_TIME: Duration = Duration::from_millis(400);

pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub struct Node {
    chain: Mutex<LocalChain>,
    pub subscriptions: Subscriptions,
}

/// How `sendTransaction` went.
pub enum Sent {
    /// Executed and committed (it may still have failed: `Err` in its status).
    Landed(Signature),
    /// Refused before landing: preflight simulation failed, or the front door refused it.
    Refused(FailedTransactionMetadata),
}

impl Node {
    pub fn new(chain: LocalChain) -> Arc<Self> {
        Arc::new(Self {
            chain: Mutex::new(chain),
            subscriptions: Subscriptions::default(),
        })
    }

    pub fn chain(&self) -> MutexGuard<'_, LocalChain> {
        // A panic while holding the lock cannot leave the bank half-written (LiteSVM commits
        // a transaction's accounts at once), so a poisoned lock is still usable.
        self.chain.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn status(&self, sig: &Signature) -> Option<(u64, Value)> {
        let chain = self.chain();
        chain
            .record(sig)
            .map(|r| (r.slot, json::error_or_null(r.err.as_ref())))
    }

    pub fn simulate(
        &self,
        tx: VersionedTransaction,
        checks: SimulationChecks,
    ) -> Result<TransactionMetadata, FailedTransactionMetadata> {
        if checks.signatures {
            // verified before the lock, as `send` does
            let tx = Checked::verify(tx);
            return self.chain().simulate_checked(tx, checks.blockhash);
        }
        self.chain().simulate(tx, checks)
    }

    /// Preflight (unless skipped), execute, then notify subscribers of the transaction (its
    /// status, its logs) and of the accounts it could have written (by account and by owning
    /// program). Its signatures were checked before, outside the chain's lock (`Checked`).
    pub fn send(&self, tx: Checked, preflight: bool) -> Sent {
        let sig = tx
            .transaction()
            .signatures
            .first()
            .copied()
            .unwrap_or_default();
        // for logsSubscribe's mentions
        let accounts = tx.transaction().message.static_account_keys().to_vec();
        let mut chain = self.chain();
        if preflight {
            if let Err(f) = chain.simulate_checked(tx.clone(), true) {
                return Sent::Refused(f);
            }
        }
        let result = chain.send_checked(tx);
        let Some(record) = chain.record(&sig).cloned() else {
            return match result {
                Err(f) => Sent::Refused(f),
                // Executed but unrecorded cannot happen; report it as refused rather than lie.
                Ok(_) => Sent::Refused(FailedTransactionMetadata {
                    err: TransactionError::AlreadyProcessed,
                    meta: Default::default(),
                }),
            };
        };
        let err = json::error_or_null(record.err.as_ref());
        if record.err.is_none() {
            let watched = self.subscriptions.watched_accounts();
            for key in record.writable.iter().filter(|k| watched.contains(k)) {
                let account = chain.get_account(key);
                self.subscriptions
                    .account_changed(record.slot, key, account.as_ref());
            }
            let programs = self.subscriptions.watched_programs();
            if !programs.is_empty() {
                for key in &record.writable {
                    if let Some(account) = chain.get_account(key) {
                        if programs.contains(&account.owner) {
                            self.subscriptions
                                .program_account_changed(record.slot, key, &account);
                        }
                    }
                }
            }
        }
        let logs = chain.history.get(&sig).map_or(&[][..], |e| &e.logs[..]);
        self.subscriptions
            .logs(record.slot, &sig, &err, logs, &accounts);
        self.subscriptions
            .signature_processed(record.slot, &sig, err);
        Sent::Landed(sig)
    }

    /// Airdrop and notify, like a transaction.
    pub fn airdrop(
        &self,
        to: &solana_pubkey::Pubkey,
        lamports: u64,
    ) -> Result<Signature, TransactionError> {
        let mut chain = self.chain();
        let sig = chain.airdrop(to, lamports)?;
        let account = chain.get_account(to);
        self.subscriptions
            .account_changed(chain.slot(), to, account.as_ref());
        Ok(sig)
    }

    /// Advances a slot every `SLOT_TIME` with the wall clock's time, until the process ends.
    pub fn run_slot_clock(self: Arc<Self>) {
        loop {
            std::thread::sleep(SLOT_TIME);
            let slot = {
                let mut chain = self.chain();
                chain.advance_slot(unix_now());
                chain.slot()
            };
            self.subscriptions.slot(slot);
        }
    }
}
