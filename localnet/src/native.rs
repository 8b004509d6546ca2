//! Runs the coordinator program natively (x86-64) as a builtin of the Solana runtime.
//!
//! The runtime calls a builtin with its `InvokeContext`; a solana-program style `entry` wants
//! `(program_id, &[AccountInfo], data)`. This module bridges the two the way agave's
//! program-test does (our own port, agave 2.3 line): serialize the instruction's accounts in
//! the loader's input format, deserialize them into `AccountInfo`s, call `entry` (catching
//! panics), and write the writable accounts back. Unlike program-test, a change to a read-only
//! account is an error here, as it is on SBF, instead of being dropped silently.
//!
//! Off-chain, the program reaches the runtime through `program_stubs` (CPI, sysvars, return
//! data, logs): [`HostStubs`] forwards those calls to the current `InvokeContext`, kept in a
//! thread-local for the duration of the instruction. Its `msg!` lines (Anchor's error lines
//! among them) reach the transaction's log through our `solana-msg` (patches/solana-msg).

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Once};

use anchor_lang::solana_program::{
    account_info::AccountInfo,
    entrypoint::{deserialize, ProgramResult, SUCCESS},
    instruction::Instruction,
    program_stubs,
    pubkey::Pubkey,
};
use solana_instruction::error::{InstructionError, UNSUPPORTED_SYSVAR};
use solana_program_runtime::{invoke_context::InvokeContext, serialization::serialize_parameters};

use crate::cpi;

/// The program's entry point, as Anchor generates it.
pub type Entry = for<'info> fn(&Pubkey, &'info [AccountInfo<'info>], &[u8]) -> ProgramResult;

thread_local! {
    /// The `InvokeContext` of the instruction running on this thread (a raw pointer: the stubs
    /// are called from inside `entry`, which has no way to pass it along).
    static INVOKE_CONTEXT: Cell<usize> = const { Cell::new(0) };
}

/// Makes `ic` the current context until the guard drops, which puts back the one before (none
/// outside an instruction, so that nothing can reach a context that is gone).
fn enter(ic: &mut InvokeContext) -> Entered {
    Entered(INVOKE_CONTEXT.with(|c| c.replace(ic as *mut InvokeContext as usize)))
}

struct Entered(usize);

impl Drop for Entered {
    fn drop(&mut self) {
        INVOKE_CONTEXT.with(|c| c.set(self.0));
    }
}

/// Where the program's `msg!` lines go off-chain (our `solana-msg`, patches/): into the log
/// of the instruction running on this thread, as the VM's `sol_log_` puts them; outside an
/// instruction, to stdout.
fn log_to_transaction(message: &str) {
    if INVOKE_CONTEXT.with(|c| c.get()) != 0 {
        solana_log_collector::ic_msg!(invoke_context(), "Program log: {}", message);
    } else {
        println!("{message}");
    }
}

#[allow(clippy::mut_from_ref)]
fn invoke_context<'a, 'b>() -> &'a mut InvokeContext<'b> {
    let ptr = INVOKE_CONTEXT.with(|c| c.get());
    assert!(ptr != 0, "program stub called outside of an instruction");
    // SAFETY: set by `run_entry` for the instruction running on this thread; the runtime keeps
    // the context alive until the builtin returns, and a CPI re-enters on the same thread.
    unsafe { &mut *(ptr as *mut InvokeContext<'b>) }
}

/// Installs [`HostStubs`] once per process (they are global in `solana-sysvar`).
pub fn install_stubs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        program_stubs::set_syscall_stubs(Box::new(HostStubs));
        solana_msg::set_log_hook(log_to_transaction);
    });
}

/// The host's stubs, for a test that wraps them (the heap measurement counts around them).
pub fn host_stubs() -> Box<dyn program_stubs::SyscallStubs> {
    Box::new(HostStubs)
}

/// Runs `entry` for the current instruction of `ic`.
pub fn run_entry(ic: &mut InvokeContext, entry: Entry) -> Result<(), InstructionError> {
    let _entered = enter(ic);
    let tx = &ic.transaction_context;
    let ix = tx.get_current_instruction_context()?;
    let program_id = *ix.get_last_program_key(tx)?;
    let mask_rent_epoch = ic.get_feature_set().mask_out_rent_epoch_in_vm_serialization;
    // No VM, so account data is copied into the buffer (no direct mapping).
    let (mut buffer, _regions, _meta) = serialize_parameters(tx, ix, true, mask_rent_epoch)?;

    // SAFETY: the buffer is in the loader's format and outlives every AccountInfo below.
    let (_, infos, data) = unsafe { deserialize(buffer.as_slice_mut().as_mut_ptr()) };
    cpi::take_failure();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| entry(&program_id, &infos, data)));
    // A failed CPI ends the instruction with the runtime's error, whatever the program made of it.
    if let Some(e) = cpi::take_failure() {
        return Err(e);
    }
    // The runtime logs the failure itself ("Program … failed: …").
    match outcome {
        Ok(Ok(())) => write_back(ic, &infos),
        Ok(Err(e)) => Err(InstructionError::from(u64::from(e))),
        // A panic aborts an SBF program; the runtime reports the same error.
        Err(_) => Err(InstructionError::ProgramFailedToComplete),
    }
}

/// Copies lamports, data and owner of the writable accounts back into the transaction; fails
/// when a read-only account was changed (SBF's `ReadonlyDataModified` and friends).
fn write_back(ic: &mut InvokeContext, infos: &[AccountInfo]) -> Result<(), InstructionError> {
    // A CPI may have re-pointed the thread-local: re-read the context from `ic`.
    let tx = &ic.transaction_context;
    let ix = tx.get_current_instruction_context()?;
    let n = ix.get_number_of_instruction_accounts();
    for i in 0..n {
        // Duplicates appear once per position; the first occurrence carries the changes.
        if ix.is_instruction_account_duplicate(i)?.is_some() {
            continue;
        }
        let mut acc = ix.try_borrow_instruction_account(tx, i)?;
        let Some(info) = infos.iter().find(|a| a.key == acc.get_key()) else {
            continue;
        };
        let data = info
            .try_borrow_data()
            .map_err(|_| InstructionError::AccountBorrowFailed)?;
        if !acc.is_writable() {
            if acc.get_lamports() != info.lamports() {
                return Err(InstructionError::ReadonlyLamportChange);
            }
            if acc.get_data() != &data[..] {
                return Err(InstructionError::ReadonlyDataModified);
            }
            if acc.get_owner() != info.owner {
                return Err(InstructionError::ModifiedProgramId);
            }
            continue;
        }
        if acc.get_lamports() != info.lamports() {
            acc.set_lamports(info.lamports())?;
        }
        if acc.get_data() != &data[..] {
            acc.can_data_be_resized(data.len())?;
            acc.set_data_from_slice(&data)?;
        }
        if acc.get_owner() != info.owner {
            acc.set_owner(info.owner.as_ref())?;
        }
    }
    Ok(())
}

/// Charges a sysvar read as the SBF syscall does, then copies the cached value out.
fn get_sysvar<T: Clone>(value: Result<Arc<T>, InstructionError>, size: usize, out: *mut u8) -> u64 {
    let ic = invoke_context();
    let cost = ic.get_execution_cost().sysvar_base_cost + size as u64;
    if ic.consume_checked(cost).is_err() {
        panic!("exceeded the compute budget reading a sysvar");
    }
    match value {
        Ok(v) => {
            // SAFETY: the caller passes a pointer to a `T` (program_stubs' contract).
            unsafe { std::ptr::write(out as *mut T, T::clone(&v)) };
            SUCCESS
        }
        Err(_) => UNSUPPORTED_SYSVAR,
    }
}

/// The syscalls the program makes off-chain, answered by the current `InvokeContext`.
struct HostStubs;

impl program_stubs::SyscallStubs for HostStubs {
    fn sol_log(&self, message: &str) {
        solana_log_collector::ic_msg!(invoke_context(), "Program log: {}", message);
    }

    fn sol_log_data(&self, fields: &[&[u8]]) {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let text: Vec<String> = fields.iter().map(|f| b64.encode(f)).collect();
        solana_log_collector::ic_msg!(invoke_context(), "Program data: {}", text.join(" "));
    }

    fn sol_invoke_signed(
        &self,
        instruction: &Instruction,
        account_infos: &[AccountInfo],
        signers_seeds: &[&[&[u8]]],
    ) -> ProgramResult {
        cpi::invoke_signed(invoke_context(), instruction, account_infos, signers_seeds)
    }

    fn sol_get_clock_sysvar(&self, out: *mut u8) -> u64 {
        let ic = invoke_context();
        let v = ic.get_sysvar_cache().get_clock();
        get_sysvar(v, std::mem::size_of::<solana_clock::Clock>(), out)
    }

    fn sol_get_rent_sysvar(&self, out: *mut u8) -> u64 {
        let ic = invoke_context();
        let v = ic.get_sysvar_cache().get_rent();
        get_sysvar(v, std::mem::size_of::<solana_rent::Rent>(), out)
    }

    fn sol_get_epoch_schedule_sysvar(&self, out: *mut u8) -> u64 {
        let ic = invoke_context();
        let v = ic.get_sysvar_cache().get_epoch_schedule();
        get_sysvar(v, 40, out)
    }

    fn sol_get_return_data(&self) -> Option<(Pubkey, Vec<u8>)> {
        let (program_id, data) = invoke_context().transaction_context.get_return_data();
        Some((*program_id, data.to_vec()))
    }

    fn sol_set_return_data(&self, data: &[u8]) {
        let ic = invoke_context();
        let tx = &mut ic.transaction_context;
        let caller = tx
            .get_current_instruction_context()
            .and_then(|ix| ix.get_last_program_key(tx).copied());
        if let Ok(caller) = caller {
            let _ = tx.set_return_data(caller, data.to_vec());
        }
    }

    fn sol_get_stack_height(&self) -> u64 {
        invoke_context().get_stack_height() as u64
    }

    fn sol_remaining_compute_units(&self) -> u64 {
        use solana_program_runtime::solana_sbpf::vm::ContextObject;
        invoke_context().get_remaining()
    }
}
