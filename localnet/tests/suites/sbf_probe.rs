//! The SBF build's i128 helpers under the VM: `sbf/psyche_sbf_probe.so` (programs/sbf-probe,
//! the reproducer of the crash that the earlier trial saw from 48 calls on) runs a 7-argument
//! function n times with a 128-bit running sum, for n from 0 to 256 across the old threshold,
//! and must return what the same code computes natively.

use litesvm::LiteSVM;
use solana_instruction::{AccountMeta, Instruction};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::Transaction;

#[test]
fn the_probe_computes_natively_s_answer_from_0_to_256_calls() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sbf/psyche_sbf_probe.so");
    let elf = std::fs::read(&path).expect("sbf/psyche_sbf_probe.so (scripts/build-sbf)");
    let mut svm = LiteSVM::new();
    let id = Pubkey::new_unique();
    svm.add_program(id, &elf).expect("the probe loads");
    let payer = Keypair::new();
    svm.airdrop(&payer.pubkey(), 10_000_000_000).unwrap();
    for n in [0u32, 1, 5, 32, 47, 48, 49, 64, 100, 128, 200, 256] {
        let mut limit = vec![2u8]; // ComputeBudgetInstruction::SetComputeUnitLimit
        limit.extend_from_slice(&1_400_000u32.to_le_bytes());
        let budget = Instruction {
            program_id: solana_sdk_ids::compute_budget::ID,
            accounts: vec![],
            data: limit,
        };
        let ix = Instruction {
            program_id: id,
            accounts: vec![AccountMeta::new(payer.pubkey(), true)],
            data: n.to_le_bytes().to_vec(),
        };
        svm.expire_blockhash();
        let tx = Transaction::new(
            &[&payer],
            Message::new(&[budget, ix], Some(&payer.pubkey())),
            svm.latest_blockhash(),
        );
        let meta = svm
            .send_transaction(tx)
            .unwrap_or_else(|f| panic!("n = {n}: {:?}\n{}", f.err, f.meta.logs.join("\n")));
        let (sum, wide) = psyche_sbf_probe::compute(n);
        let mut want = sum.to_le_bytes().to_vec();
        want.extend_from_slice(&wide.to_le_bytes());
        assert_eq!(meta.return_data.program_id, id);
        assert_eq!(meta.return_data.data, want, "n = {n}");
    }
}
