//! The program runs inside LiteSVM through the native shim: a run is created (system
//! `create_account` + `init_coordinator` with its PDA CPI), started, joined and ticked with
//! real signed transactions.

use psyche_coordinator::{CoordinatorAccount, RunConfigParams};
use psyche_coordinator_core::RunState;
use psyche_localnet::ix::Run;
use psyche_localnet::LocalChain;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signer::Signer;
use solana_transaction::Transaction;

use crate::support::small_config;

fn send(
    chain: &mut LocalChain,
    payer: &Keypair,
    signers: &[&Keypair],
    ixs: &[solana_instruction::Instruction],
) -> Result<(), String> {
    let (hash, _) = chain.latest_blockhash();
    let msg = Message::new_with_blockhash(ixs, Some(&payer.pubkey()), &hash);
    let mut all: Vec<&Keypair> = vec![payer];
    all.extend_from_slice(signers);
    let tx = Transaction::new(&all, msg, hash);
    chain
        .send(tx.into())
        .map(|_| ())
        .map_err(|f| format!("{:?}", f.err))
}

#[test]
fn create_start_join_tick() {
    let t0 = 1_700_000_000;
    let mut chain = LocalChain::new(t0);
    let payer = Keypair::new();
    chain.airdrop(&payer.pubkey(), 10_000_000_000).unwrap();
    let account = Keypair::new();
    let run = Run::new("smoke", account.pubkey());
    let rent = chain
        .svm
        .minimum_balance_for_rent_exemption(CoordinatorAccount::SPACE);
    let config = RunConfigParams::from_core(&small_config());
    send(
        &mut chain,
        &payer,
        &[&account],
        &[
            psyche_localnet::ix::create_coordinator_account(
                &payer.pubkey(),
                &account.pubkey(),
                rent,
            ),
            run.init(
                &payer.pubkey(),
                "smoke",
                payer.pubkey(),
                payer.pubkey(),
                true,
                config,
                7,
            ),
        ],
    )
    .unwrap();
    let acct = chain.get_account(&account.pubkey()).unwrap();
    assert_eq!(acct.data.len(), CoordinatorAccount::SPACE);
    assert!(
        chain.get_account(&run.instance).is_some(),
        "instance PDA created by CPI"
    );

    send(
        &mut chain,
        &payer,
        &[],
        &[run.set_paused(&payer.pubkey(), false)],
    )
    .unwrap();
    let client = Keypair::new();
    chain.airdrop(&client.pubkey(), 1_000_000_000).unwrap();
    send(
        &mut chain,
        &client,
        &[],
        &[run.join_run(&client.pubkey(), None, [7; 32])],
    )
    .unwrap();
    // a double join is refused by name (AlreadyJoined = 6004)
    chain.advance_slot(t0);
    let err = send(
        &mut chain,
        &client,
        &[],
        &[run.join_run(&client.pubkey(), None, [7; 32])],
    )
    .unwrap_err();
    assert!(err.contains("Custom(6004)"), "{err}");

    // anyone may tick; after the grace time the run leaves WaitingForMembers
    let stranger = Keypair::new();
    chain.airdrop(&stranger.pubkey(), 1_000_000_000).unwrap();
    chain.advance_slot(t0 + 10);
    send(&mut chain, &stranger, &[], &[run.tick(&stranger.pubkey())]).unwrap();
    let data = chain.get_account(&account.pubkey()).unwrap().data;
    let state: &psyche_coordinator_core::CoordinatorState = bytemuck::from_bytes(&data[8..]);
    assert_eq!(state.run_state(), RunState::Warmup);
}
