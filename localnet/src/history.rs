//! Transaction history: what the chain remembers of every landed transaction after its status
//! window has passed (`getTransaction`, `getSignaturesForAddress`, `getSignatureStatuses` with
//! `searchTransactionHistory`, and the blocks of `getBlock`: one per slot in which transactions
//! landed), and with a ledger directory keeps across restarts.
//!
//! The newest `LIMIT` transactions stay in memory, indexed by signature and by every account
//! they name. With a ledger, each one is also appended to `transactions.log` (a u32 length,
//! then bincode of the entry) before the RPC answers; a torn last frame (a kill mid-write) is
//! dropped on replay, and the file is rewritten with what memory holds once it has grown to
//! twice that. Airdrops have no transaction of ours (the bank's faucet signs them), so they
//! have a status but no entry here.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use solana_hash::Hash;
use solana_message::inner_instruction::InnerInstruction;
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

/// Transactions kept in memory (a dev chain's week of a small run's ticks and witnesses).
pub const LIMIT: usize = 100_000;
const LOG: &str = "transactions.log";

/// One landed transaction, as `getTransaction` reports it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TxEntry {
    pub slot: u64,
    pub block_time: i64,
    /// Its block (`getBlock`): the chain makes one for each slot in which transactions
    /// landed, whose parent is the block before (the genesis at first).
    pub blockhash: Hash,
    pub parent_slot: u64,
    pub previous_blockhash: Hash,
    pub tx: VersionedTransaction,
    pub err: Option<TransactionError>,
    pub logs: Vec<String>,
    /// The instructions the program invoked (CPIs), per top-level instruction.
    pub inner: Vec<Vec<InnerInstruction>>,
    /// What the transaction's last instruction set as return data, if anything.
    pub return_data: Option<(Pubkey, Vec<u8>)>,
    pub units: u64,
    pub fee: u64,
    /// Lamports of each of the message's static accounts before and after.
    pub pre_balances: Vec<u64>,
    pub post_balances: Vec<u64>,
}

impl TxEntry {
    pub fn signature(&self) -> Signature {
        self.tx.signatures.first().copied().unwrap_or_default()
    }
}

pub struct History {
    limit: usize,
    /// Entries in landing order; the first has sequence number `first_seq`.
    entries: VecDeque<TxEntry>,
    first_seq: u64,
    by_signature: HashMap<Signature, u64>,
    /// Per account, the sequence numbers of the entries that name it, oldest first.
    by_address: HashMap<Pubkey, VecDeque<u64>>,
    log: Option<Log>,
}

struct Log {
    path: PathBuf,
    file: BufWriter<File>,
    /// Frames in the file (memory holds the newest `limit` of them).
    frames: usize,
}

fn frame(entry: &TxEntry) -> Vec<u8> {
    let body = bincode::serialize(entry).expect("a transaction entry serializes");
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

impl Default for History {
    fn default() -> Self {
        Self::with_limit(LIMIT)
    }
}

impl History {
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            entries: VecDeque::new(),
            first_seq: 0,
            by_signature: HashMap::new(),
            by_address: HashMap::new(),
            log: None,
        }
    }

    /// The history kept in `dir` (created if need be): its newest `limit` entries, then every
    /// new one appended there too.
    pub fn open(dir: &Path, limit: usize) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let path = dir.join(LOG);
        let mut raw = Vec::new();
        if path.exists() {
            File::open(&path)?.read_to_end(&mut raw)?;
        }
        let mut history = Self::with_limit(limit);
        let (mut at, mut good, mut frames) = (0, 0, 0);
        while let Some(len) = raw.get(at..at + 4) {
            let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
            let Some(body) = raw.get(at + 4..at + 4 + len) else {
                break; // torn: a kill mid-write
            };
            let Ok(entry) = bincode::deserialize::<TxEntry>(body) else {
                break;
            };
            history.push(entry);
            at += 4 + len;
            good = at;
            frames += 1;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        file.set_len(good as u64)?; // drop a torn tail, so that new frames follow whole ones
        history.log = Some(Log {
            path,
            file: BufWriter::new(file),
            frames,
        });
        Ok(history)
    }

    fn push(&mut self, entry: TxEntry) {
        let seq = self.first_seq + self.entries.len() as u64;
        self.by_signature.insert(entry.signature(), seq);
        for key in entry.tx.message.static_account_keys() {
            self.by_address.entry(*key).or_default().push_back(seq);
        }
        self.entries.push_back(entry);
        while self.entries.len() > self.limit {
            self.evict();
        }
    }

    fn evict(&mut self) {
        let Some(old) = self.entries.pop_front() else {
            return;
        };
        let seq = self.first_seq;
        self.first_seq += 1;
        self.by_signature.remove(&old.signature());
        for key in old.tx.message.static_account_keys() {
            if let Some(list) = self.by_address.get_mut(key) {
                while list.front().is_some_and(|s| *s <= seq) {
                    list.pop_front();
                }
                if list.is_empty() {
                    self.by_address.remove(key);
                }
            }
        }
    }

    /// Remembers a landed transaction; with a log, hands its frame to the OS first.
    pub fn record(&mut self, entry: TxEntry) -> io::Result<()> {
        let result = match self.log.as_mut() {
            Some(log) => {
                log.frames += 1;
                log.file
                    .write_all(&frame(&entry))
                    .and_then(|_| log.file.flush())
            }
            None => Ok(()),
        };
        self.push(entry);
        result
    }

    /// Once a slot: make the log durable, and rewrite it once it holds twice what memory does.
    pub fn sync(&mut self) -> io::Result<()> {
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        if log.frames > 2 * self.limit {
            return self.rewrite();
        }
        log.file.get_ref().sync_data()
    }

    fn rewrite(&mut self) -> io::Result<()> {
        let log = self.log.as_mut().expect("called with a log");
        let tmp = log.path.with_extension("tmp");
        let mut out = BufWriter::new(File::create(&tmp)?);
        for e in &self.entries {
            out.write_all(&frame(e))?;
        }
        out.flush()?;
        out.get_ref().sync_data()?;
        fs::rename(&tmp, &log.path)?;
        let file = OpenOptions::new().append(true).open(&log.path)?;
        log.file = BufWriter::new(file);
        log.frames = self.entries.len();
        Ok(())
    }

    pub fn get(&self, sig: &Signature) -> Option<&TxEntry> {
        let seq = *self.by_signature.get(sig)?;
        self.entries.get((seq - self.first_seq) as usize)
    }

    /// Entries naming `address`, newest first: those older than `before` (when given), down to
    /// but not including `until`, at most `limit`.
    pub fn for_address(
        &self,
        address: &Pubkey,
        before: Option<&Signature>,
        until: Option<&Signature>,
        limit: usize,
    ) -> Vec<&TxEntry> {
        let Some(list) = self.by_address.get(address) else {
            return Vec::new();
        };
        let before = before.and_then(|s| self.by_signature.get(s)).copied();
        let until = until.and_then(|s| self.by_signature.get(s)).copied();
        list.iter()
            .rev()
            .filter(|seq| before.is_none_or(|b| **seq < b))
            .take_while(|seq| until.is_none_or(|u| **seq > u))
            .filter_map(|seq| self.entries.get((seq - self.first_seq) as usize))
            .take(limit)
            .collect()
    }

    /// (slot, blockhash) of the block before one at `slot`: the newest entry's block, or its
    /// parent when that is `slot` itself; None before the first.
    pub fn parent_of(&self, slot: u64) -> Option<(u64, Hash)> {
        let last = self.entries.back()?;
        Some(if last.slot < slot {
            (last.slot, last.blockhash)
        } else {
            (last.parent_slot, last.previous_blockhash)
        })
    }

    /// The slots of the blocks from `start` to `end` (inclusive), ascending.
    pub fn block_slots(&self, start: u64, end: u64) -> Vec<u64> {
        let first = self.entries.partition_point(|e| e.slot < start);
        let mut slots: Vec<u64> = self
            .entries
            .range(first..)
            .take_while(|e| e.slot <= end)
            .map(|e| e.slot)
            .collect();
        slots.dedup();
        slots
    }

    /// The entries that landed in `slot`, in landing order.
    pub fn in_slot(&self, slot: u64) -> impl Iterator<Item = &TxEntry> {
        let first = self.entries.partition_point(|e| e.slot < slot);
        self.entries
            .range(first..)
            .take_while(move |e| e.slot == slot)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
