//! The reproducer of the SBF build's "crash after 48 calls" (issue 17), kept as a program the
//! local chain's tests run (`localnet/tests/suites/sbf_probe.rs`) over 0 to 256 calls.
//!
//! The trial that first built our program for Solana's VM found that a small program calling
//! a 7-argument function in a loop and multiplying 128-bit numbers ran for up to 32 calls and
//! crashed from 48 on, writing 8 bytes at `(n << 48) - n + 8`, and suspected the linker's
//! handling of stack arguments (arguments 6 and on). The cause was the i128 multiply helper's
//! calling convention (`psyche-sbf-int128`): `__multi3` stored its product through its first
//! argument register, which its caller had filled with a factor of the loop count, and the
//! multiply was only left to `__multi3` once the compiler could no longer bound the product to
//! 64 bits. This program keeps both halves of that shape: [`compute`] runs natively too, and
//! the test compares what the VM returns with it.
//!
//! Instruction data: the call count n (u32 LE). Return data: `compute(n)`, 8 + 16 bytes LE.

use solana_program::account_info::AccountInfo;
use solana_program::entrypoint::ProgramResult;
use solana_program::program_error::ProgramError;
use solana_program::pubkey::Pubkey;

#[cfg(target_os = "solana")]
use psyche_sbf_int128 as _;
#[cfg(target_os = "solana")]
use solana_compiler_builtins as _;

#[cfg(not(feature = "no-entrypoint"))]
solana_program::entrypoint!(process_instruction);

/// Seven arguments: two of them travel on the stack (BPF passes five in registers).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn seven(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64, g: u64) -> u64 {
    a ^ b.rotate_left(7) ^ c.wrapping_mul(3) ^ d ^ e.wrapping_add(f) ^ g.rotate_right(11)
}

/// The sum of `seven` over n calls and a 128-bit running sum of i * (2^48 - 1).
pub fn compute(n: u32) -> (u64, u128) {
    let mut sum = 0u64;
    let mut wide = 0u128;
    for i in 0..n as u64 {
        let i = core::hint::black_box(i);
        sum = sum.wrapping_add(seven(i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6));
        wide = wide.wrapping_add(i as u128 * ((1u128 << 48) - 1));
    }
    (sum, wide)
}

pub fn process_instruction(
    _program_id: &Pubkey,
    _accounts: &[AccountInfo],
    data: &[u8],
) -> ProgramResult {
    let n: [u8; 4] = data
        .try_into()
        .map_err(|_| ProgramError::InvalidInstructionData)?;
    let (sum, wide) = compute(u32::from_le_bytes(n));
    let mut out = [0u8; 24];
    out[..8].copy_from_slice(&sum.to_le_bytes());
    out[8..].copy_from_slice(&wide.to_le_bytes());
    solana_program::program::set_return_data(&out);
    Ok(())
}
