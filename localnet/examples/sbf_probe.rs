//! Loads an SBF build of the coordinator program (`scripts/build-sbf`) into the local chain's
//! LiteSVM (agave 2.3) under the declared program id and sends it one instruction without data:
//! Anchor's dispatch must refuse it (`InstructionFallbackNotFound`) under the real VM. Prints
//! the outcome, the compute units and the program's log (docs/sbf.md).
//!
//!     cargo run --release -p psyche-localnet --example sbf_probe -- target/deploy/psyche_coordinator-v0.so

use litesvm::LiteSVM;
use solana_instruction::{AccountMeta, Instruction};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signer::Signer;
use solana_transaction::Transaction;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: sbf_probe ELF");
        std::process::exit(2);
    };
    let elf = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("sbf_probe: cannot read {path}: {e}");
        std::process::exit(2)
    });
    let mut svm = LiteSVM::new();
    let id = psyche_coordinator::ID;
    if let Err(e) = svm.add_program(id, &elf) {
        eprintln!("sbf_probe: LiteSVM refused {path}: {e:?}");
        std::process::exit(1);
    }
    let payer = Keypair::new();
    svm.airdrop(&payer.pubkey(), 1_000_000_000)
        .expect("airdrop");
    let ix = Instruction {
        program_id: id,
        accounts: vec![AccountMeta::new(payer.pubkey(), true)],
        data: vec![],
    };
    let tx = Transaction::new(
        &[&payer],
        Message::new(&[ix], Some(&payer.pubkey())),
        svm.latest_blockhash(),
    );
    let (outcome, meta) = match svm.send_transaction(tx) {
        Ok(meta) => ("succeeded".to_string(), meta),
        Err(failed) => (format!("failed: {:?}", failed.err), failed.meta),
    };
    println!(
        "{path}: loaded; an instruction without data {outcome}, {} compute units",
        meta.compute_units_consumed
    );
    for line in meta.logs {
        println!("  {line}");
    }
}
