//! Issues found and fixed: each stays refused by name.

use psyche_coordinator::CoordinatorAccount;
use psyche_localnet::ix::{instance_key, PROGRAM_ID};
use solana_instruction::{AccountMeta, Instruction};
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

/// Anchor 0.31's on-chain IDL instructions check `IdlCreateBuffer`'s `#[account(zero)]`
/// buffer with `&data[..8]` before any length check (anchor-syn `generate_constraint_zeroed`):
/// a buffer account under 8 bytes made the program panic. Found by the fuzzer
/// (`PSYCHE_FUZZ_SEED=2`, iteration 6898); the program is now built with `no-idl` (no
/// on-chain IDL instructions), so the instruction is refused by name.
#[test]
fn idl_create_buffer_with_an_empty_account_is_refused_by_name() {
    let mut env = Env::new();
    let signer = env.keypair();
    let mut data = anchor_lang::idl::IDL_IX_TAG.to_le_bytes().to_vec();
    data.push(1); // IdlInstruction::CreateBuffer
    for buffer in [Pubkey::new_unique(), env.payer.pubkey()] {
        let ix = Instruction {
            program_id: PROGRAM_ID,
            accounts: vec![
                AccountMeta::new(buffer, false),
                AccountMeta::new_readonly(signer.pubkey(), true),
            ],
            data: data.clone(),
        };
        let err = env.send(&[&signer], &[ix]).unwrap_err();
        assert!(
            matches!(
                err,
                solana_transaction_error::TransactionError::InstructionError(
                    0,
                    solana_instruction::error::InstructionError::Custom(_)
                )
            ),
            "buffer {buffer}: {err:?} (a panic in the program)"
        );
    }
}

/// On a validator the CPI syscall fails the instruction with the runtime's error; the native
/// shim must do the same (`cpi.rs` keeps the error for `native::run_entry`), also for runtime
/// errors that have no `ProgramError` counterpart. Here: `init_coordinator` with the instance
/// PDA passed read-only, whose `create_account` CPI escalates the writable privilege.
#[test]
fn cpi_runtime_errors_keep_their_names() {
    let mut env = Env::new();
    let blank = preallocate(&mut env, CoordinatorAccount::SPACE, &PROGRAM_ID);
    let mut ix = init_ix(&env, &blank.pubkey(), "ro", &test_config(2));
    ix.accounts[1].is_writable = false;
    env.expect_err(
        &[],
        &[ix],
        solana_transaction_error::TransactionError::InstructionError(
            0,
            solana_instruction::error::InstructionError::PrivilegeEscalation,
        ),
        &[blank.pubkey(), instance_key("ro")],
    );
}
