//! A chain with a ledger, dropped as a killed process would be (nothing flushed at exit), and
//! reopened from the same directory: every committed account is back byte for byte, slots go
//! on, and a torn last frame (a kill mid-write) is dropped without losing the others.

use std::io::Write;

use psyche_coordinator::{CoordinatorAccount, RunConfigParams};
use psyche_coordinator_core::RunConfig;
use psyche_localnet::ix::{create_coordinator_account, Run};
use psyche_localnet::LocalChain;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signer::Signer;
use solana_transaction::Transaction;

const T0: i64 = 1_700_000_000;

fn send(
    chain: &mut LocalChain,
    payer: &Keypair,
    extra: &[&Keypair],
    ixs: &[solana_instruction::Instruction],
) {
    let (hash, _) = chain.latest_blockhash();
    let mut signers = vec![payer];
    signers.extend_from_slice(extra);
    let tx = Transaction::new(
        &signers,
        Message::new_with_blockhash(ixs, Some(&payer.pubkey()), &hash),
        hash,
    );
    chain.send(tx.into()).map_err(|f| f.err).unwrap();
}

#[test]
fn a_reopened_ledger_has_every_committed_account() {
    let dir = std::env::temp_dir().join(format!("psyche-ledger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (payer, account, client) = (Keypair::new(), Keypair::new(), Keypair::new());
    let run = Run::new("ledger", account.pubkey());
    let (before, slot) = {
        let mut chain = LocalChain::with_ledger(T0, &dir).unwrap();
        chain.airdrop(&payer.pubkey(), 10_000_000_000).unwrap();
        chain.airdrop(&client.pubkey(), 1_000_000_000).unwrap();
        let rent = chain
            .svm
            .minimum_balance_for_rent_exemption(CoordinatorAccount::SPACE);
        let config = RunConfigParams::from_core(&RunConfig {
            min_clients: 1,
            init_min_clients: 2,
            ..RunConfig::DEFAULT
        });
        send(
            &mut chain,
            &payer,
            &[&account],
            &[
                create_coordinator_account(&payer.pubkey(), &account.pubkey(), rent),
                run.init(
                    &payer.pubkey(),
                    "ledger",
                    payer.pubkey(),
                    payer.pubkey(),
                    true,
                    config,
                    1,
                ),
            ],
        );
        chain.advance_slot(T0 + 1);
        send(
            &mut chain,
            &payer,
            &[],
            &[run.set_paused(&payer.pubkey(), false)],
        );
        send(
            &mut chain,
            &client,
            &[],
            &[run.join_run(&client.pubkey(), None, [9; 32])],
        );
        let keys = [
            payer.pubkey(),
            client.pubkey(),
            account.pubkey(),
            run.instance,
        ];
        (keys.map(|k| chain.get_account(&k).unwrap()), chain.slot())
        // dropped here without any shutdown step, like a killed process
    };

    // a kill in the middle of the next frame
    let log = dir.join("accounts.log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(&[200, 1, 0, 0, 7, 7, 7]).unwrap();
    drop(f);

    let chain = LocalChain::with_ledger(T0 + 5, &dir).unwrap();
    let keys = [
        payer.pubkey(),
        client.pubkey(),
        account.pubkey(),
        run.instance,
    ];
    for (key, was) in keys.iter().zip(before.iter()) {
        assert_eq!(
            chain.get_account(key).as_ref(),
            Some(was),
            "{key} differs after reopening"
        );
    }
    assert!(
        chain.slot() >= slot,
        "slots go on: {} < {slot}",
        chain.slot()
    );
    // the reopened log was compacted into one frame: the torn bytes are gone
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(
        size < 2 * CoordinatorAccount::SPACE as u64,
        "log is {size} bytes"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn transactions_of_the_earlier_chain_cannot_be_replayed() {
    let dir = std::env::temp_dir().join(format!("psyche-ledger-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let payer = Keypair::new();
    let to = Keypair::new().pubkey();
    let tx = {
        let mut chain = LocalChain::with_ledger(T0, &dir).unwrap();
        chain.airdrop(&payer.pubkey(), 1_000_000_000).unwrap();
        let (hash, _) = chain.latest_blockhash();
        let ix = solana_system_interface::instruction::transfer(&payer.pubkey(), &to, 1_000_000);
        let tx = Transaction::new(
            &[&payer],
            Message::new_with_blockhash(&[ix], Some(&payer.pubkey()), &hash),
            hash,
        );
        chain.send(tx.clone().into()).unwrap();
        tx
    };
    let mut chain = LocalChain::with_ledger(T0 + 1, &dir).unwrap();
    let err = chain.send(tx.into()).unwrap_err().err;
    assert_eq!(
        err,
        solana_transaction_error::TransactionError::BlockhashNotFound
    );
    assert_eq!(chain.get_account(&to).unwrap().lamports, 1_000_000);
    let _ = std::fs::remove_dir_all(&dir);
}
