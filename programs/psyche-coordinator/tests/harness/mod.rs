//! A minimal in-process Solana bank for native tests: it serializes the accounts of one
//! instruction in the runtime's input format (the aligned loader ABI), hands them to the
//! program's Anchor `entry` exactly as an SBF entrypoint would (`entrypoint::deserialize`),
//! and writes the writable accounts back only on success (a failed instruction changes
//! nothing). Syscall stubs provide the Clock and Rent sysvars and the system program's
//! `create_account`/`transfer`/`allocate`/`assign` for CPIs (with PDA signer checks).
//!
//! No signatures are verified: an account meta's `is_signer` is taken as given, as the runtime
//! does after signature verification. This is not LiteSVM: no compute metering, no
//! transaction size limit, one instruction per call.

#![allow(dead_code)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use anchor_lang::prelude::{AccountInfo, Clock, Pubkey, Rent};
use anchor_lang::solana_program::entrypoint::{deserialize, MAX_PERMITTED_DATA_INCREASE};
use anchor_lang::solana_program::instruction::Instruction;
use anchor_lang::solana_program::program_error::ProgramError;
use anchor_lang::solana_program::program_stubs::{set_syscall_stubs, SyscallStubs};
use anchor_lang::system_program;

const NON_DUP_MARKER: u8 = u8::MAX;
/// Owner of deployed programs (BPF upgradeable loader).
const BPF_LOADER_UPGRADEABLE: Pubkey =
    anchor_lang::solana_program::pubkey!("BPFLoaderUpgradeab1e11111111111111111111111");

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestAccount {
    pub lamports: u64,
    pub owner: Pubkey,
    pub data: Vec<u8>,
    pub executable: bool,
}

impl TestAccount {
    pub fn system(lamports: u64) -> Self {
        Self {
            lamports,
            owner: system_program::ID,
            data: vec![],
            executable: false,
        }
    }
}

/// How an instruction failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxError {
    Program(ProgramError),
    Panicked(String),
}

impl TxError {
    /// The custom error code, if it is one.
    pub fn custom(&self) -> Option<u32> {
        match self {
            TxError::Program(ProgramError::Custom(c)) => Some(*c),
            _ => None,
        }
    }
}

thread_local! {
    static UNIX_TIMESTAMP: Cell<i64> = const { Cell::new(0) };
    static CALLER: Cell<Pubkey> = const { Cell::new(Pubkey::new_from_array([0; 32])) };
}

struct Stubs;

/// Writes a sysvar value through the stub's raw pointer (the caller passes `&mut T`).
fn write_sysvar<T>(var_addr: *mut u8, value: T) -> u64 {
    // SAFETY: `impl_sysvar_get!` passes a pointer to a live, aligned `T` (Clock or Rent).
    unsafe { std::ptr::write(var_addr as *mut T, value) };
    0
}

impl SyscallStubs for Stubs {
    fn sol_log(&self, _message: &str) {}

    fn sol_log_data(&self, _fields: &[&[u8]]) {}

    fn sol_get_clock_sysvar(&self, var_addr: *mut u8) -> u64 {
        let clock = Clock {
            slot: 1,
            epoch_start_timestamp: 0,
            epoch: 0,
            leader_schedule_epoch: 0,
            unix_timestamp: UNIX_TIMESTAMP.with(Cell::get),
        };
        write_sysvar(var_addr, clock)
    }

    fn sol_get_rent_sysvar(&self, var_addr: *mut u8) -> u64 {
        write_sysvar(var_addr, Rent::default())
    }

    fn sol_invoke_signed(
        &self,
        instruction: &Instruction,
        account_infos: &[AccountInfo],
        signers_seeds: &[&[&[u8]]],
    ) -> Result<(), ProgramError> {
        let caller = CALLER.with(Cell::get);
        let find = |key: &Pubkey| {
            account_infos
                .iter()
                .find(|a| a.key == key)
                .ok_or(ProgramError::NotEnoughAccountKeys)
        };
        // Signer privileges: a signer of the outer instruction or a PDA of the caller.
        let pdas: Vec<Pubkey> = signers_seeds
            .iter()
            .map(|seeds| Pubkey::create_program_address(seeds, &caller))
            .collect::<Result<_, _>>()
            .map_err(|_| ProgramError::InvalidSeeds)?;
        for meta in &instruction.accounts {
            let info = find(&meta.pubkey)?;
            if meta.is_signer && !info.is_signer && !pdas.contains(&meta.pubkey) {
                return Err(ProgramError::MissingRequiredSignature);
            }
            if meta.is_writable && !info.is_writable {
                return Err(ProgramError::InvalidArgument);
            }
        }
        if instruction.program_id != system_program::ID {
            return Err(ProgramError::IncorrectProgramId);
        }
        let data = &instruction.data;
        let u64_at = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().unwrap());
        let key_at = |i: usize| Pubkey::new_from_array(data[i..i + 32].try_into().unwrap());
        let account = |i: usize| find(&instruction.accounts[i].pubkey);
        let tag = u32::from_le_bytes(data[..4].try_into().unwrap());
        match tag {
            // CreateAccount { lamports, space, owner }
            0 => {
                let (from, to) = (account(0)?, account(1)?);
                if to.lamports() != 0 || !to.data_is_empty() || to.owner != &system_program::ID {
                    return Err(ProgramError::AccountAlreadyInitialized);
                }
                transfer(from, to, u64_at(4))?;
                to.resize(u64_at(12) as usize)?;
                to.assign(&key_at(20));
            }
            // Assign { owner }
            1 => {
                let a = account(0)?;
                if a.owner != &system_program::ID {
                    return Err(ProgramError::IllegalOwner);
                }
                a.assign(&key_at(4));
            }
            // Transfer { lamports }
            2 => transfer(account(0)?, account(1)?, u64_at(4))?,
            // Allocate { space }
            8 => {
                let a = account(0)?;
                if a.owner != &system_program::ID || !a.data_is_empty() {
                    return Err(ProgramError::AccountAlreadyInitialized);
                }
                a.resize(u64_at(4) as usize)?;
            }
            _ => return Err(ProgramError::InvalidInstructionData),
        }
        Ok(())
    }
}

fn transfer(from: &AccountInfo, to: &AccountInfo, lamports: u64) -> Result<(), ProgramError> {
    if from.owner != &system_program::ID || !from.data_is_empty() {
        return Err(ProgramError::InvalidArgument);
    }
    let left = from
        .lamports()
        .checked_sub(lamports)
        .ok_or(ProgramError::InsufficientFunds)?;
    **from.try_borrow_mut_lamports()? = left;
    **to.try_borrow_mut_lamports()? += lamports;
    Ok(())
}

fn install_stubs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        set_syscall_stubs(Box::new(Stubs));
    });
}

/// Accounts by key, and a clock.
pub struct Bank {
    pub program_id: Pubkey,
    pub accounts: BTreeMap<Pubkey, TestAccount>,
    pub unix_timestamp: i64,
    pub entry: Entry,
}

/// An Anchor program's `entry` function.
pub type Entry =
    for<'info> fn(&Pubkey, &'info [AccountInfo<'info>], &[u8]) -> Result<(), ProgramError>;

/// The ABI input buffer, 8-byte aligned (backed by u64s).
struct Input {
    words: Vec<u64>,
    len: usize,
}

impl Input {
    fn new() -> Self {
        Self {
            words: Vec::new(),
            len: 0,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut bytemuck::cast_slice_mut(&mut self.words)[..len]
    }

    fn push(&mut self, data: &[u8]) {
        let start = self.len;
        self.len += data.len();
        self.words.resize(self.len.div_ceil(8), 0);
        self.bytes_mut()[start..].copy_from_slice(data);
    }

    fn zeros(&mut self, n: usize) {
        self.len += n;
        self.words.resize(self.len.div_ceil(8), 0);
    }

    fn align8(&mut self) {
        let pad = self.len.next_multiple_of(8) - self.len;
        self.zeros(pad);
    }
}

impl Bank {
    pub fn new(program_id: Pubkey, entry: Entry) -> Self {
        install_stubs();
        let mut accounts = BTreeMap::new();
        let executable = |owner| TestAccount {
            lamports: 1,
            owner,
            data: vec![],
            executable: true,
        };
        accounts.insert(system_program::ID, executable(Pubkey::default()));
        accounts.insert(program_id, executable(BPF_LOADER_UPGRADEABLE));
        Self {
            program_id,
            accounts,
            unix_timestamp: 1_700_000_000,
            entry,
        }
    }

    pub fn account(&self, key: &Pubkey) -> Option<&TestAccount> {
        self.accounts.get(key)
    }

    pub fn lamports(&self, key: &Pubkey) -> u64 {
        self.accounts.get(key).map_or(0, |a| a.lamports)
    }

    pub fn set_account(&mut self, key: Pubkey, account: TestAccount) {
        self.accounts.insert(key, account);
    }

    pub fn airdrop(&mut self, key: Pubkey, lamports: u64) {
        self.accounts
            .entry(key)
            .or_insert_with(|| TestAccount::system(0))
            .lamports += lamports;
    }

    /// Runs one instruction of this bank's program; on success the writable accounts are
    /// written back (accounts left with no lamports are removed, as the runtime does).
    pub fn process(&mut self, ix: &Instruction) -> Result<(), TxError> {
        assert_eq!(
            ix.program_id, self.program_id,
            "only the program under test"
        );
        // Merge duplicate metas as the runtime does (signer/writable if any occurrence is).
        let mut keys: Vec<Pubkey> = Vec::new();
        let mut flags: BTreeMap<Pubkey, (bool, bool)> = BTreeMap::new();
        for m in &ix.accounts {
            let f = flags.entry(m.pubkey).or_insert((false, false));
            f.0 |= m.is_signer;
            f.1 |= m.is_writable;
            if !keys.contains(&m.pubkey) {
                keys.push(m.pubkey);
            }
        }
        let mut input = Input::new();
        input.push(&(ix.accounts.len() as u64).to_le_bytes());
        for (i, m) in ix.accounts.iter().enumerate() {
            let first = ix
                .accounts
                .iter()
                .position(|o| o.pubkey == m.pubkey)
                .unwrap();
            if first < i {
                input.push(&[first as u8]);
                input.zeros(7);
                continue;
            }
            let acc = self
                .accounts
                .get(&m.pubkey)
                .cloned()
                .unwrap_or_else(|| TestAccount::system(0));
            let (signer, writable) = flags[&m.pubkey];
            input.push(&[
                NON_DUP_MARKER,
                signer as u8,
                writable as u8,
                acc.executable as u8,
            ]);
            input.zeros(4); // original data length (written by deserialize)
            input.push(m.pubkey.as_ref());
            input.push(acc.owner.as_ref());
            input.push(&acc.lamports.to_le_bytes());
            input.push(&(acc.data.len() as u64).to_le_bytes());
            input.push(&acc.data);
            input.zeros(MAX_PERMITTED_DATA_INCREASE);
            input.align8();
            input.push(&u64::MAX.to_le_bytes()); // rent epoch
        }
        input.push(&(ix.data.len() as u64).to_le_bytes());
        input.push(&ix.data);
        input.push(self.program_id.as_ref());

        UNIX_TIMESTAMP.with(|t| t.set(self.unix_timestamp));
        CALLER.with(|c| c.set(self.program_id));
        let before: u64 = keys.iter().map(|k| self.lamports(k)).sum();
        let entry = self.entry;
        let mut written: Vec<(Pubkey, TestAccount)> = Vec::new();
        let result = {
            let buffer = input.bytes_mut().as_mut_ptr();
            // SAFETY: the buffer is laid out as the loader serializes it, 8-byte aligned,
            // with the realloc padding after every account's data; it outlives the infos.
            let (program_id, infos, data) = unsafe { deserialize(buffer) };
            let outcome = catch_unwind(AssertUnwindSafe(|| entry(program_id, &infos, data)));
            if matches!(outcome, Ok(Ok(()))) {
                for key in &keys {
                    let info = infos.iter().find(|a| a.key == key).unwrap();
                    let after = TestAccount {
                        lamports: info.lamports(),
                        owner: *info.owner,
                        data: info.data.borrow().to_vec(),
                        executable: info.executable,
                    };
                    if flags[key].1 {
                        written.push((*key, after));
                    } else {
                        let old = self.accounts.get(key).cloned();
                        let unchanged = old.as_ref() == Some(&after)
                            || (old.is_none() && after == TestAccount::system(0));
                        assert!(unchanged, "read-only account {key} was modified");
                    }
                }
            }
            outcome
        };
        match result {
            Ok(Ok(())) => {
                let after: u64 = keys
                    .iter()
                    .map(|k| {
                        written
                            .iter()
                            .find(|(w, _)| w == k)
                            .map_or_else(|| self.lamports(k), |(_, a)| a.lamports)
                    })
                    .sum();
                assert_eq!(before, after, "lamports are not conserved");
                for (key, account) in written {
                    if account.lamports == 0 {
                        self.accounts.remove(&key);
                    } else {
                        self.accounts.insert(key, account);
                    }
                }
                Ok(())
            }
            Ok(Err(e)) => Err(TxError::Program(e)),
            Err(panic) => Err(TxError::Panicked(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            )),
        }
    }
}
