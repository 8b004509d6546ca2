//! Signatures are verified before the chain's lock is taken (`chain::Checked`), and the bank
//! then skips its own check. Every transaction must still end as it did when the bank checked:
//! each case below goes through the node (`Node::send`, `Node::simulate`) and through a second,
//! identical chain whose bank checks the signatures itself, and both must agree on the outcome
//! and on every balance, with and without preflight; and a batch, whose transactions are
//! verified on several threads, must answer as its requests do one by one.

use psyche_localnet::chain::{Checked, SimulationChecks, LAMPORTS_PER_SIGNATURE};
use psyche_localnet::node::{Node, Sent};
use psyche_localnet::{rpc, LocalChain};
use serde_json::{json, Value};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signature::Signature;
use solana_signer::Signer;
use solana_system_interface::instruction::transfer;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction::Transaction;
use solana_transaction_error::TransactionError;

use crate::support::{SOL, T0};

fn chain_paying(payer: &Keypair) -> LocalChain {
    let mut chain = LocalChain::new(T0);
    chain.airdrop(&payer.pubkey(), 100 * SOL).unwrap();
    chain
}

/// A transfer of `lamports` from `payer`, signed by `payer`.
fn signed(chain: &LocalChain, payer: &Keypair, to: &Keypair, lamports: u64) -> Transaction {
    let hash = chain.latest_blockhash().0;
    let ix = transfer(&payer.pubkey(), &to.pubkey(), lamports);
    let message = Message::new_with_blockhash(&[ix], Some(&payer.pubkey()), &hash);
    Transaction::new(&[payer], message, hash)
}

/// What the chain made of `tx`: its status once landed, else the reason it was refused.
type Outcome = Result<Result<(), TransactionError>, TransactionError>;

fn through_node(node: &Node, tx: &VersionedTransaction, preflight: bool) -> Outcome {
    match node.send(Checked::verify(tx.clone()), preflight) {
        Sent::Landed(sig) => Ok(node
            .chain()
            .record(&sig)
            .unwrap()
            .err
            .clone()
            .map_or(Ok(()), Err)),
        Sent::Refused(f) => Err(f.err),
    }
}

fn through_bank(chain: &mut LocalChain, tx: &VersionedTransaction, preflight: bool) -> Outcome {
    if preflight {
        chain
            .simulate(tx.clone(), SimulationChecks::ALL)
            .map_err(|f| f.err)?;
    }
    let sig = tx.signatures.first().copied().unwrap_or_default();
    let sent = chain.send(tx.clone());
    match chain.record(&sig) {
        Some(record) => Ok(record.err.clone().map_or(Ok(()), Err)),
        None => Err(sent.unwrap_err().err),
    }
}

#[test]
fn every_transaction_ends_as_when_the_bank_checked_its_signatures() {
    let (payer, to, stranger) = (Keypair::new(), Keypair::new(), Keypair::new());
    let template = chain_paying(&payer);
    let good = signed(&template, &payer, &to, SOL);
    let message_bytes = good.message_data();

    let mut cases: Vec<(&str, Transaction, Outcome)> = vec![("signed", good.clone(), Ok(Ok(())))];
    let mut forged = good.clone();
    forged.signatures[0] = stranger.sign_message(&message_bytes);
    cases.push((
        "signed by another key",
        forged,
        Err(TransactionError::SignatureFailure),
    ));
    let mut tampered = good.clone();
    tampered.message.instructions[0].data[4] ^= 1; // the amount, after signing
    cases.push((
        "changed after signing",
        tampered,
        Err(TransactionError::SignatureFailure),
    ));
    let mut unsigned = good.clone();
    unsigned.signatures[0] = Signature::default();
    cases.push((
        "unsigned",
        unsigned,
        Err(TransactionError::SignatureFailure),
    ));
    let mut none = good.clone();
    none.signatures.clear();
    cases.push(("no signature", none, Err(TransactionError::SanitizeFailure)));
    let mut extra = good.clone();
    extra.signatures.push(stranger.sign_message(&message_bytes));
    cases.push((
        "one signature too many",
        extra,
        Err(TransactionError::SanitizeFailure),
    ));
    // malformed and badly signed: the bank's sanitize error, not the signature's
    let mut malformed = good.clone();
    malformed.message.instructions[0].program_id_index = 9;
    malformed.signatures[0] = stranger.sign_message(&malformed.message_data());
    cases.push((
        "malformed and forged",
        malformed,
        Err(TransactionError::SanitizeFailure),
    ));

    for (name, tx, expected) in cases {
        let tx = VersionedTransaction::from(tx);
        for preflight in [true, false] {
            let node = Node::new(chain_paying(&payer));
            let mut bank = chain_paying(&payer);
            assert_eq!(bank.latest_blockhash(), node.chain().latest_blockhash());
            let got = through_node(&node, &tx, preflight);
            assert_eq!(
                got,
                through_bank(&mut bank, &tx, preflight),
                "{name}, preflight {preflight}"
            );
            assert_eq!(got, expected, "{name}, preflight {preflight}");
            let chain = node.chain();
            for key in [payer.pubkey(), to.pubkey()] {
                let balance = |c: &LocalChain| c.get_account(&key).map_or(0, |a| a.lamports);
                assert_eq!(balance(&chain), balance(&bank), "{name}: balance of {key}");
            }
            assert_eq!(
                chain.transaction_count(),
                bank.transaction_count(),
                "{name}"
            );
            let paid = 100 * SOL - chain.get_account(&payer.pubkey()).unwrap().lamports;
            let landed = expected.is_ok();
            assert_eq!(
                paid,
                if landed {
                    SOL + LAMPORTS_PER_SIGNATURE
                } else {
                    0
                },
                "{name}"
            );
        }
        // simulateTransaction with sigVerify: the same verdict as the bank's own check
        let node = Node::new(chain_paying(&payer));
        let mut bank = chain_paying(&payer);
        let verdict = |r: Result<_, litesvm::types::FailedTransactionMetadata>| {
            r.map(|_| ()).map_err(|f| f.err)
        };
        assert_eq!(
            verdict(node.simulate(tx.clone(), SimulationChecks::ALL)),
            verdict(bank.simulate(tx.clone(), SimulationChecks::ALL)),
            "{name}, simulated"
        );
    }
}

/// A JSON-RPC batch has its transactions verified on several threads before any runs
/// (`rpc::handle_body`): each of its replies must be the one its request gets alone, in order,
/// forged transactions, one that does not decode and other methods among them.
#[test]
fn a_batch_verified_on_several_threads_answers_as_its_requests_alone() {
    use base64::Engine;
    let payer = Keypair::new();
    let others: Vec<Keypair> = (0..3).map(|_| Keypair::new()).collect();
    let template = chain_paying(&payer);
    let mut requests = Vec::new();
    let mut forged = 0;
    for i in 0..24u64 {
        let mut tx = signed(&template, &payer, &others[i as usize % 3], SOL + i);
        if i % 5 == 2 {
            tx.signatures[0] = others[0].sign_message(&tx.message_data());
            forged += 1;
        }
        let raw = bincode::serialize(&VersionedTransaction::from(tx)).unwrap();
        let config = json!({"encoding": "base64", "skipPreflight": i % 2 == 0});
        let params = json!([
            base64::engine::general_purpose::STANDARD.encode(raw),
            config
        ]);
        requests.push(
            json!({"jsonrpc": "2.0", "id": i, "method": "sendTransaction",
                             "params": params}),
        );
    }
    let undecodable = json!(["not base64!", {"encoding": "base64"}]);
    requests.insert(
        7,
        json!({"jsonrpc": "2.0", "id": "bad", "method": "sendTransaction", "params": undecodable}),
    );
    let balance = json!([payer.pubkey().to_string()]);
    requests.insert(
        12,
        json!({"jsonrpc": "2.0", "id": "balance", "method": "getBalance", "params": balance}),
    );

    let batched = Node::new(chain_paying(&payer));
    let body = Value::Array(requests.clone()).to_string();
    let replies: Value = serde_json::from_str(&rpc::handle_body(&batched, &body)).unwrap();
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), requests.len());
    let alone = Node::new(chain_paying(&payer));
    for (request, reply) in requests.iter().zip(replies) {
        let one: Value =
            serde_json::from_str(&rpc::handle_body(&alone, &request.to_string())).unwrap();
        assert_eq!(reply, &one, "{request}");
    }
    let refused = replies
        .iter()
        .filter(|r| r["error"]["code"] == json!(-32002));
    assert_eq!(refused.count(), forged);
    assert_eq!(replies[7]["error"]["code"], json!(-32602));
    let landed = replies.iter().filter(|r| r["result"].is_string()).count();
    assert_eq!(landed, 24 - forged);
    let key = payer.pubkey();
    assert_eq!(
        batched.chain().get_account(&key).unwrap().lamports,
        alone.chain().get_account(&key).unwrap().lamports
    );
}

/// `sigverify`'s verifier (ed25519-dalek 2) is faster than the runtime's, and only what it
/// accepts skips the bank's check: so it must accept nothing the runtime refuses. Compared on
/// a signature of a transfer's message, then that signature with each of its 512 bits flipped,
/// each bit of the key and of the message's first 32 bytes flipped, S + L (the same scalar,
/// not reduced), and R and the key replaced by each small-order point and by non-canonical
/// encodings (y + p, the sign bit set on x = 0).
#[test]
fn the_faster_verifier_accepts_only_what_the_runtime_accepts() {
    use psyche_localnet::sigverify;
    use solana_pubkey::Pubkey;

    let payer = Keypair::new();
    let chain = chain_paying(&payer);
    let message = signed(&chain, &payer, &Keypair::new(), 1)
        .message
        .serialize();
    let signature = payer.sign_message(&message);
    let key = payer.pubkey();
    let sig_bytes = <[u8; 64]>::from(signature);
    let flipped = |bytes: &[u8], bit: usize| {
        let mut bytes = bytes.to_vec();
        bytes[bit / 8] ^= 1 << (bit % 8);
        bytes
    };
    let with_sig = |bytes: Vec<u8>| Signature::from(<[u8; 64]>::try_from(bytes).unwrap());
    let with_key = |bytes: Vec<u8>| Pubkey::new_from_array(bytes.try_into().unwrap());

    let mut cases = vec![(signature, key, message.clone())];
    for bit in 0..512 {
        cases.push((with_sig(flipped(&sig_bytes, bit)), key, message.clone()));
    }
    for bit in 0..256 {
        cases.push((
            signature,
            with_key(flipped(key.as_ref(), bit)),
            message.clone(),
        ));
        cases.push((signature, key, flipped(&message, bit)));
    }
    // S + L: L, the group's order, little-endian; S < L, so no byte carries past the last
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut s_plus_l = sig_bytes;
    let mut carry = 0u16;
    for (i, l) in L.iter().enumerate() {
        let sum = u16::from(s_plus_l[32 + i]) + u16::from(*l) + carry;
        s_plus_l[32 + i] = sum as u8;
        carry = sum >> 8;
    }
    cases.push((Signature::from(s_plus_l), key, message.clone()));
    // The eight points of small order (the identity, y = -1, y = 0 with either sign, and four
    // of order 8), then y + p for y < 19 and either sign bit: encodings a strict verifier
    // must refuse as R or as the key.
    let mut points: Vec<[u8; 32]> = [
        "0100000000000000000000000000000000000000000000000000000000000000",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000080",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    ]
    .iter()
    .map(|h| hex::decode(h).unwrap().try_into().unwrap())
    .collect();
    for point in &points {
        let weak = ed25519_dalek::VerifyingKey::from_bytes(point).map(|k| k.is_weak());
        assert_eq!(
            weak.ok(),
            Some(true),
            "{} is of small order",
            hex::encode(point)
        );
    }
    for y in 0..19u8 {
        let mut point = [0xff; 32];
        point[0] = 0xed + y;
        points.push(point);
        point[31] = 0x7f;
        points.push(point);
    }
    for point in &points {
        let mut r = sig_bytes;
        r[..32].copy_from_slice(point);
        cases.push((Signature::from(r), key, message.clone()));
        cases.push((signature, Pubkey::new_from_array(*point), message.clone()));
        // both small: the equation could hold but for the small-order checks
        let mut zero_s = [0u8; 64];
        zero_s[..32].copy_from_slice(point);
        for other in &points {
            cases.push((
                Signature::from(zero_s),
                Pubkey::new_from_array(*other),
                message.clone(),
            ));
        }
    }

    let mut accepted = 0;
    for (signature, key, message) in &cases {
        let runtime = signature.verify(key.as_ref(), message);
        let faster = sigverify::verifies(signature, key, message);
        assert_eq!(
            faster,
            runtime,
            "signature {signature}, key {key}, message {}",
            hex::encode(message)
        );
        accepted += usize::from(runtime);
    }
    // only the untouched signature verifies
    assert_eq!(accepted, 1, "of {} cases", cases.len());
}
