//! Transaction history over JSON-RPC: `getTransaction` (its meta as validators write it: fee,
//! balances, logs, the error of a failed one), `getSignaturesForAddress` (newest first, with
//! `before`, `until`, `limit`), `getSignatureStatuses` past the status window only with
//! `searchTransactionHistory`, and the history kept across a restart from the ledger.

use psyche_coordinator::CoordinatorProgramError as PE;
use psyche_localnet::chain::{BLOCKHASH_WINDOW, LAMPORTS_PER_SIGNATURE};
use psyche_localnet::node::Node;
use psyche_localnet::{rpc, LocalChain};
use serde_json::{json, Value};
use solana_keypair::Keypair;
use solana_signer::Signer;
use solana_system_interface::instruction::transfer;

use crate::support::*;

fn call(node: &Node, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    serde_json::from_str(&rpc::handle_body(node, &body.to_string())).unwrap()
}

fn sign(env: &mut Env, signers: &[&Keypair], ixs: &[solana_instruction::Instruction]) -> String {
    let payer = env.payer.insecure_clone();
    env.chain.advance_slot(env.now);
    let tx = env.tx(&payer, signers, ixs);
    let sig = tx.signatures[0].to_string();
    let _ = env.chain.send(tx);
    sig
}

#[test]
fn landed_transactions_are_found_by_signature_and_by_address() {
    let mut env = Env::new();
    let r = env.create_run("history", true, test_config(2));
    let stranger = env.keypair();
    let to = Keypair::new();
    let payer = env.payer.pubkey();
    let sent = sign(&mut env, &[], &[transfer(&payer, &to.pubkey(), 5 * SOL)]);
    // a refused instruction still lands: the fee is charged, nothing else changes
    let refused = sign(
        &mut env,
        &[&stranger],
        &[r.run.set_paused(&stranger.pubkey(), true)],
    );
    let second = sign(&mut env, &[], &[transfer(&payer, &to.pubkey(), SOL)]);
    let node = Node::new(std::mem::replace(&mut env.chain, LocalChain::new(T0)));

    let got = call(&node, "getTransaction", json!([sent]))["result"].clone();
    let meta = &got["meta"];
    assert_eq!(meta["err"], Value::Null);
    assert_eq!(meta["status"], json!({"Ok": null}));
    assert_eq!(meta["fee"], json!(LAMPORTS_PER_SIGNATURE));
    let keys = got["transaction"]["message"]["accountKeys"].clone();
    assert_eq!(keys[0], json!(payer.to_string()));
    assert_eq!(keys[1], json!(to.pubkey().to_string()));
    let (pre, post) = (&meta["preBalances"], &meta["postBalances"]);
    assert_eq!(pre[1], json!(0));
    assert_eq!(post[1], json!(5 * SOL));
    assert_eq!(
        pre[0].as_u64().unwrap() - post[0].as_u64().unwrap(),
        5 * SOL + LAMPORTS_PER_SIGNATURE
    );
    assert_eq!(got["transaction"]["signatures"][0], json!(sent));
    assert!(got["slot"].as_u64().unwrap() > 0 && got["blockTime"] == json!(T0));
    assert!(got.get("version").is_none()); // only when the client names the versions it takes

    // the failed one: its error as the status has it, the program's logs, only the fee paid
    let got = call(
        &node,
        "getTransaction",
        json!([refused, {"encoding": "json", "maxSupportedTransactionVersion": 0}]),
    )["result"]
        .clone();
    let code = PE::NotAuthority as u32 + anchor_lang::error::ERROR_CODE_OFFSET;
    assert_eq!(
        got["meta"]["err"],
        json!({"InstructionError": [0, {"Custom": code}]})
    );
    assert_eq!(got["version"], json!("legacy"));
    let logs: Vec<&str> = got["meta"]["logMessages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(logs.iter().any(|l| l.contains("NotAuthority")), "{logs:?}");
    // two signatures (payer, stranger): the bank charged what meta.fee says
    let (pre, post) = (&got["meta"]["preBalances"], &got["meta"]["postBalances"]);
    assert_eq!(got["meta"]["fee"], json!(2 * LAMPORTS_PER_SIGNATURE));
    assert_eq!(
        pre[0].as_u64().unwrap() - post[0].as_u64().unwrap(),
        2 * LAMPORTS_PER_SIGNATURE
    );
    // the bytes, base64, decode to the transaction that was sent
    let raw = call(
        &node,
        "getTransaction",
        json!([sent, {"encoding": "base64"}]),
    )["result"]["transaction"]
        .clone();
    assert_eq!(raw[1], json!("base64"));

    // by address: newest first; before, until and limit
    let list = |params: Value| -> Vec<String> {
        call(&node, "getSignaturesForAddress", params)["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["signature"].as_str().unwrap().to_string())
            .collect()
    };
    let to_key = to.pubkey().to_string();
    assert_eq!(list(json!([to_key])), vec![second.clone(), sent.clone()]);
    assert_eq!(list(json!([to_key, {"limit": 1}])), vec![second.clone()]);
    assert_eq!(
        list(json!([to_key, {"before": second.clone()}])),
        vec![sent.clone()]
    );
    let second_sig = second.clone();
    assert_eq!(list(json!([to_key, {"until": sent.clone()}])), vec![second]);
    let payer_list = list(json!([payer.to_string()]));
    // the run's creation and these three; airdrops are the faucet's, not in the history
    assert_eq!(payer_list.len(), 1 + 3, "{payer_list:?}");
    assert_eq!(payer_list[0], second_sig);
    assert_eq!(
        list(json!([stranger.pubkey().to_string()])),
        vec![refused.clone()]
    );
    let entry = &call(
        &node,
        "getSignaturesForAddress",
        json!([stranger.pubkey().to_string()]),
    )["result"][0];
    assert_eq!(entry["err"]["InstructionError"][1]["Custom"], json!(code));
    assert_eq!(entry["confirmationStatus"], json!("finalized"));
    assert_eq!(
        call(
            &node,
            "getSignaturesForAddress",
            json!([to_key, {"limit": 0}])
        )["error"]["code"],
        json!(-32602)
    );
    assert_eq!(
        call(
            &node,
            "getTransaction",
            json!([Keypair::new().pubkey().to_string()])
        )["error"]["code"],
        json!(-32602) // not a signature
    );

    // blocks: one per slot in which transactions landed, each the child of the one before
    let slot_of = |sig: &str| {
        call(&node, "getTransaction", json!([sig]))["result"]["slot"]
            .as_u64()
            .unwrap()
    };
    let (s1, s2, s3) = (slot_of(&sent), slot_of(&refused), slot_of(&second_sig));
    let block = |slot: u64, config: Value| call(&node, "getBlock", json!([slot, config]));
    let b2 = block(s2, json!({}))["result"].clone();
    let b1 = block(s1, json!({"transactionDetails": "signatures"}))["result"].clone();
    assert_eq!(b2["parentSlot"], json!(s1));
    assert_eq!(b2["previousBlockhash"], b1["blockhash"]);
    assert_eq!(b1["signatures"], json!([sent]));
    assert!(b1.get("transactions").is_none());
    let txs = b2["transactions"].as_array().unwrap();
    assert_eq!(txs.len(), 1);
    assert_eq!(txs[0]["transaction"]["signatures"][0], json!(refused));
    assert_eq!(txs[0]["meta"]["fee"], json!(2 * LAMPORTS_PER_SIGNATURE));
    assert_eq!(b2["blockTime"], json!(T0));
    assert_eq!(
        call(&node, "getBlocks", json!([s1, s3]))["result"],
        json!([s1, s2, s3])
    );
    assert_eq!(call(&node, "getBlockTime", json!([s3]))["result"], json!(T0));
    // a slot in which nothing landed has no block
    assert_eq!(block(s3 + 1, json!({}))["error"]["code"], json!(-32009));
    assert_eq!(
        block(s1, json!({"transactionDetails": "accounts"}))["error"]["code"],
        json!(-32602)
    );

    // past the status window a status needs searchTransactionHistory
    {
        let mut chain = node.chain();
        for _ in 0..(2 * BLOCKHASH_WINDOW + 2) {
            chain.advance_slot(T0);
        }
    }
    let status = |search: bool| {
        call(
            &node,
            "getSignatureStatuses",
            json!([[sent.clone()], {"searchTransactionHistory": search}]),
        )["result"]["value"][0]
            .clone()
    };
    assert_eq!(status(false), Value::Null);
    assert_eq!(status(true)["confirmationStatus"], json!("finalized"));
    assert!(call(&node, "getTransaction", json!([sent]))["result"].is_object());
}

#[test]
fn the_history_survives_a_restart_from_the_ledger() {
    let dir = std::env::temp_dir().join(format!("psyche-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let payer = Keypair::new();
    let to = Keypair::new();
    let sigs: Vec<String> = {
        let mut chain = LocalChain::with_ledger(T0, &dir).unwrap();
        chain.airdrop(&payer.pubkey(), 10 * SOL).unwrap();
        (1..=3u64)
            .map(|i| {
                chain.advance_slot(T0 + i as i64);
                let (hash, _) = chain.latest_blockhash();
                let tx = solana_transaction::Transaction::new_signed_with_payer(
                    &[transfer(&payer.pubkey(), &to.pubkey(), i * SOL)],
                    Some(&payer.pubkey()),
                    &[&payer],
                    hash,
                );
                let sig = tx.signatures[0].to_string();
                chain.send(tx.into()).unwrap();
                sig
            })
            .collect()
    }; // dropped as a kill would: nothing flushed at exit beyond what each send wrote
       // a torn frame at the end (a kill mid-write) is dropped, the rest kept
    let log = dir.join("transactions.log");
    let mut raw = std::fs::read(&log).unwrap();
    raw.extend_from_slice(&[200, 1, 0, 0, 1, 2, 3]);
    std::fs::write(&log, raw).unwrap();
    let node = Node::new(LocalChain::with_ledger(T0 + 10, &dir).unwrap());
    let listed: Vec<String> = call(
        &node,
        "getSignaturesForAddress",
        json!([to.pubkey().to_string()]),
    )["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["signature"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, sigs.iter().rev().cloned().collect::<Vec<_>>());
    let got = call(&node, "getTransaction", json!([sigs[2]]))["result"].clone();
    assert_eq!(got["meta"]["postBalances"][1], json!(6 * SOL));
    assert_eq!(got["blockTime"], json!(T0 + 3));
    // and it goes on: a new transaction lands after the kept ones
    {
        let mut chain = node.chain();
        chain.advance_slot(T0 + 11);
        let (hash, _) = chain.latest_blockhash();
        let tx = solana_transaction::Transaction::new_signed_with_payer(
            &[transfer(&payer.pubkey(), &to.pubkey(), SOL)],
            Some(&payer.pubkey()),
            &[&payer],
            hash,
        );
        chain.send(tx.into()).unwrap();
    }
    drop(node);
    let chain = LocalChain::with_ledger(T0 + 20, &dir).unwrap();
    assert_eq!(chain.history.len(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn memory_keeps_the_newest_entries_and_forgets_the_rest_everywhere() {
    use psyche_localnet::history::{History, TxEntry};
    let payer = Keypair::new();
    let (a, b) = (Keypair::new().pubkey(), Keypair::new().pubkey());
    let entry = |to: &solana_pubkey::Pubkey, lamports: u64| {
        let tx = solana_transaction::Transaction::new_signed_with_payer(
            &[transfer(&payer.pubkey(), to, lamports)],
            Some(&payer.pubkey()),
            &[&payer],
            solana_hash::Hash::new_unique(),
        );
        TxEntry {
            slot: lamports,
            block_time: T0,
            blockhash: solana_hash::Hash::new_unique(),
            parent_slot: 0,
            previous_blockhash: solana_hash::Hash::default(),
            tx: tx.into(),
            err: None,
            logs: vec![],
            inner: vec![],
            return_data: None,
            units: 0,
            fee: LAMPORTS_PER_SIGNATURE,
            pre_balances: vec![],
            post_balances: vec![],
        }
    };
    let mut h = History::with_limit(2);
    let e1 = entry(&a, 1);
    let (e2, e3) = (entry(&b, 2), entry(&a, 3));
    for e in [&e1, &e2, &e3] {
        h.record(e.clone()).unwrap();
    }
    assert_eq!(h.len(), 2);
    assert!(h.get(&e1.signature()).is_none());
    assert_eq!(h.get(&e3.signature()), Some(&e3));
    let slots = |key: &solana_pubkey::Pubkey| -> Vec<u64> {
        h.for_address(key, None, None, 10)
            .iter()
            .map(|e| e.slot)
            .collect()
    };
    assert_eq!(slots(&a), vec![3]); // e1 is gone from the address index too
    assert_eq!(slots(&b), vec![2]);
    assert_eq!(slots(&payer.pubkey()), vec![3, 2]);
}
