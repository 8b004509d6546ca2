//! Cross-program invocation for a natively running program (the `sol_invoke_signed` stub).
//!
//! The program only calls the system program (Anchor's `init` creates the instance and
//! authorization PDAs; `close` moves lamports itself). The steps are the runtime's own for a
//! CPI: derive the PDA signers from the seeds, copy the caller's view of the accounts into the
//! transaction, run the callee, copy the callee's changes back into the caller's `AccountInfo`s.

use std::cell::RefCell;

use anchor_lang::solana_program::{
    account_info::AccountInfo, entrypoint::ProgramResult, instruction::Instruction,
    program_error::ProgramError, pubkey::Pubkey,
};
use solana_instruction::error::InstructionError;
use solana_program_runtime::invoke_context::InvokeContext;
use solana_stable_layout::stable_instruction::StableInstruction;
use solana_timings::ExecuteTimings;

thread_local! {
    /// The runtime's error of the last failed CPI on this thread (see `failed`).
    static FAILURE: RefCell<Option<InstructionError>> = const { RefCell::new(None) };
}

/// On SBF a failed CPI ends the calling instruction with the callee's error. Natively the
/// error comes back to the program as a `ProgramError`, which cannot name every runtime error
/// (`PrivilegeEscalation`, ...): it is kept here, and the shim (`native::run_entry`) fails
/// with it instead of whatever the program makes of it.
fn failed(e: InstructionError) -> ProgramError {
    FAILURE.with(|c| *c.borrow_mut() = Some(e.clone()));
    ProgramError::try_from(e).unwrap_or(ProgramError::Custom(u32::MAX))
}

/// The error of a CPI that failed since the last call, if any (and forgets it).
pub(crate) fn take_failure() -> Option<InstructionError> {
    FAILURE.with(|c| c.borrow_mut().take())
}

pub fn invoke_signed(
    ic: &mut InvokeContext,
    instruction: &Instruction,
    account_infos: &[AccountInfo],
    signers_seeds: &[&[&[u8]]],
) -> ProgramResult {
    let instruction = StableInstruction::from(instruction.clone());
    let caller = {
        let tx = &ic.transaction_context;
        let ix = tx.get_current_instruction_context().map_err(failed)?;
        *ix.get_last_program_key(tx).map_err(failed)?
    };

    let mut signers = Vec::with_capacity(signers_seeds.len());
    for seeds in signers_seeds {
        // On SBF bad seeds fail the syscall; here they fail the CPI instead of panicking.
        signers.push(
            Pubkey::create_program_address(seeds, &caller)
                .map_err(|_| ProgramError::InvalidSeeds)?,
        );
    }
    let (accounts, program_indices) = ic
        .prepare_instruction(&instruction, &signers)
        .map_err(failed)?;

    // The caller's AccountInfos may hold changes the transaction has not seen yet.
    let mut writable = Vec::with_capacity(accounts.len());
    {
        let tx = &ic.transaction_context;
        let ix = tx.get_current_instruction_context().map_err(failed)?;
        for meta in &accounts {
            let key = tx
                .get_key_of_account_at_index(meta.index_in_transaction)
                .map_err(failed)?;
            let pos = account_infos
                .iter()
                .position(|a| a.key == key)
                .ok_or(ProgramError::NotEnoughAccountKeys)?;
            let info = &account_infos[pos];
            let mut acc = ix
                .try_borrow_instruction_account(tx, meta.index_in_caller)
                .map_err(failed)?;
            if acc.get_lamports() != info.lamports() {
                acc.set_lamports(info.lamports()).map_err(failed)?;
            }
            let data = info.try_borrow_data()?;
            if acc.get_data() != &data[..] {
                acc.can_data_be_resized(data.len()).map_err(failed)?;
                acc.set_data_from_slice(&data).map_err(failed)?;
            }
            if acc.get_owner() != info.owner {
                acc.set_owner(info.owner.as_ref()).map_err(failed)?;
            }
            if meta.is_writable {
                writable.push((meta.index_in_caller, pos));
            }
        }
    }

    let mut units = 0;
    ic.process_instruction(
        &instruction.data,
        &accounts,
        &program_indices,
        &mut units,
        &mut ExecuteTimings::default(),
    )
    .map_err(failed)?;

    let tx = &ic.transaction_context;
    let ix = tx.get_current_instruction_context().map_err(failed)?;
    for (index_in_caller, pos) in writable {
        let acc = ix
            .try_borrow_instruction_account(tx, index_in_caller)
            .map_err(failed)?;
        let info = &account_infos[pos];
        **info.try_borrow_mut_lamports()? = acc.get_lamports();
        if info.owner != acc.get_owner() {
            // The system program assigned the account (`create_account`): the runtime rewrites
            // the owner in the caller's input buffer, as `assign` does.
            info.assign(acc.get_owner());
        }
        let new = acc.get_data();
        if info.data_len() != new.len() {
            info.resize(new.len())?;
        }
        info.try_borrow_mut_data()?.copy_from_slice(new);
    }
    // (the runtime logs the callee's "invoke [2]" and its outcome itself)
    Ok(())
}
