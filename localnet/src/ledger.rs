//! An append-only ledger of committed accounts, so a local chain that is killed and started
//! again with the same directory resumes with every transaction it acknowledged.
//!
//! Each committed transaction appends one frame holding the accounts it could have written,
//! as they are after it; the frame is handed to the OS before the RPC answers (it survives a
//! kill of the process; `sync` makes it survive a crash of the machine). Replaying the frames
//! in order rebuilds the accounts; a torn last frame (a kill mid-write) is dropped. When the
//! log grows past `COMPACT_BYTES` it is rewritten as one frame of the current accounts.
//!
//! Frame: u32 length, then the slot (u64) and the accounts, each: pubkey (32), present (u8),
//! and if present lamports (u64), owner (32), executable (u8), rent epoch (u64), data length
//! (u32) and data. Little-endian.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use solana_account::Account;
use solana_pubkey::Pubkey;

/// Rewrite the log as a snapshot past this size.
pub const COMPACT_BYTES: u64 = 64 << 20;
const LOG: &str = "accounts.log";

pub struct Ledger {
    dir: PathBuf,
    file: BufWriter<File>,
    bytes: u64,
    /// Every account the ledger holds (what a snapshot must write).
    keys: BTreeSet<Pubkey>,
}

/// An account as the ledger keeps it (None: closed).
pub type Entry = (Pubkey, Option<Account>);

/// What a replay found: the latest value of each account and the last slot.
pub struct Replayed {
    pub accounts: Vec<Entry>,
    pub slot: u64,
}

fn encode(slot: u64, accounts: &[Entry]) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    out.extend_from_slice(&slot.to_le_bytes());
    for (key, account) in accounts {
        out.extend_from_slice(key.as_ref());
        match account {
            None => out.push(0),
            Some(a) => {
                out.push(1);
                out.extend_from_slice(&a.lamports.to_le_bytes());
                out.extend_from_slice(a.owner.as_ref());
                out.push(a.executable as u8);
                out.extend_from_slice(&a.rent_epoch.to_le_bytes());
                out.extend_from_slice(&(a.data.len() as u32).to_le_bytes());
                out.extend_from_slice(&a.data);
            }
        }
    }
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_le_bytes());
    out
}

/// Reads `n` bytes at `*at`, or None when the frame is short (torn).
fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Option<&'a [u8]> {
    let s = buf.get(*at..at.checked_add(n)?)?;
    *at += n;
    Some(s)
}

fn u64_at(buf: &[u8], at: &mut usize) -> Option<u64> {
    Some(u64::from_le_bytes(take(buf, at, 8)?.try_into().ok()?))
}

fn decode(frame: &[u8]) -> Option<(u64, Vec<Entry>)> {
    let mut at = 0;
    let slot = u64_at(frame, &mut at)?;
    let mut accounts = Vec::new();
    while at < frame.len() {
        let key = Pubkey::new_from_array(take(frame, &mut at, 32)?.try_into().ok()?);
        let account = match take(frame, &mut at, 1)?[0] {
            0 => None,
            _ => {
                let lamports = u64_at(frame, &mut at)?;
                let owner = Pubkey::new_from_array(take(frame, &mut at, 32)?.try_into().ok()?);
                let executable = take(frame, &mut at, 1)?[0] != 0;
                let rent_epoch = u64_at(frame, &mut at)?;
                let len = u32::from_le_bytes(take(frame, &mut at, 4)?.try_into().ok()?);
                let data = take(frame, &mut at, len as usize)?.to_vec();
                Some(Account {
                    lamports,
                    data,
                    owner,
                    executable,
                    rent_epoch,
                })
            }
        };
        accounts.push((key, account));
    }
    Some((slot, accounts))
}

impl Ledger {
    /// Opens (or creates) the ledger in `dir` and replays it.
    pub fn open(dir: &Path) -> io::Result<(Self, Replayed)> {
        fs::create_dir_all(dir)?;
        let path = dir.join(LOG);
        let mut raw = Vec::new();
        if path.exists() {
            File::open(&path)?.read_to_end(&mut raw)?;
        }
        let mut latest: std::collections::BTreeMap<Pubkey, Option<Account>> = Default::default();
        let (mut slot, mut at, mut good) = (0, 0, 0);
        while let Some(len) = take(&raw, &mut at, 4) {
            let len = u32::from_le_bytes(len.try_into().unwrap()) as usize;
            let Some(frame) = take(&raw, &mut at, len).and_then(decode) else {
                break; // torn by a kill mid-write: that transaction was never acknowledged
            };
            slot = frame.0;
            latest.extend(frame.1);
            good = at;
        }
        if good < raw.len() {
            eprintln!(
                "psyche-localnet: ledger: dropped a torn last frame ({} bytes)",
                raw.len() - good
            );
        }
        let accounts: Vec<_> = latest.into_iter().collect();
        let keys = accounts.iter().map(|(k, _)| *k).collect();
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let mut ledger = Self {
            dir: dir.to_path_buf(),
            file: BufWriter::new(file),
            bytes: 0,
            keys,
        };
        // Start from one snapshot frame: replays stay short, the torn tail is gone.
        ledger.rewrite(slot, &accounts)?;
        Ok((ledger, Replayed { accounts, slot }))
    }

    /// Appends the accounts a transaction committed and hands them to the OS.
    pub fn record(&mut self, slot: u64, accounts: &[Entry]) -> io::Result<()> {
        let frame = encode(slot, accounts);
        self.file.write_all(&frame)?;
        self.file.flush()?;
        self.bytes += frame.len() as u64;
        self.keys.extend(accounts.iter().map(|(k, _)| *k));
        Ok(())
    }

    /// Makes what was recorded survive a crash of the machine.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.get_ref().sync_data()
    }

    pub fn needs_compaction(&self) -> bool {
        self.bytes > COMPACT_BYTES
    }

    pub fn keys(&self) -> impl Iterator<Item = &Pubkey> {
        self.keys.iter()
    }

    /// Replaces the log by one frame of `accounts` (written aside, then renamed over it).
    pub fn rewrite(&mut self, slot: u64, accounts: &[Entry]) -> io::Result<()> {
        let live: Vec<_> = accounts
            .iter()
            .filter(|(_, a)| a.is_some())
            .cloned()
            .collect();
        let frame = encode(slot, &live);
        let tmp = self.dir.join(format!("{LOG}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&frame)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.dir.join(LOG))?;
        let file = OpenOptions::new().append(true).open(self.dir.join(LOG))?;
        self.file = BufWriter::new(file);
        self.bytes = frame.len() as u64;
        self.keys = live.iter().map(|(k, _)| *k).collect();
        Ok(())
    }
}
