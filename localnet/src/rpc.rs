//! Solana JSON-RPC: the methods a client of the coordinator uses (solana-py, anchorpy, the
//! Solana CLI's basics; `getProgramAccounts` with `dataSize`/`memcmp` filters lists a run's
//! contributor accounts; `getTransaction` and `getSignaturesForAddress` read the transaction
//! history, `history.rs`). Batches are supported; unknown methods answer -32601. `http.rs`
//! carries the requests.

use serde_json::{json, Value};
use solana_message::VersionedMessage;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;

use crate::chain::{Checked, SimulationChecks};
use crate::json::{self, error_reply, Encoding};
use crate::node::{Node, Sent};

/// Largest single airdrop (like a test validator's faucet cap).
const MAX_AIRDROP: u64 = 1_000_000 * 1_000_000_000;

struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError {
        code: -32602,
        message: format!("Invalid params: {}", message.into()),
        data: None,
    }
}

type RpcResult = Result<Value, RpcError>;

pub fn handle_body(node: &Node, body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Array(batch)) => {
            let checked = check_batch(&batch);
            // each reply is JSON already: joined as it is, not parsed again to be written again
            let replies: Vec<String> = batch
                .iter()
                .zip(checked)
                .map(|(r, c)| handle_one(node, r, c))
                .collect();
            format!("[{}]", replies.join(","))
        }
        Ok(req) => handle_one(node, &req, None),
        Err(e) => error_reply(Value::Null, -32700, &format!("Parse error: {e}")),
    }
}

/// Transactions a thread verifies at least when a batch's are spread over threads (handing
/// work to another thread costs a fraction of one verification).
const PER_THREAD: usize = 4;

/// The transaction of each `sendTransaction` in a batch, decoded, then its signatures checked
/// on every core (rayon's pool, whose threads live as long as the node), before any runs: a
/// batch is one request, and on its own thread its transactions' signatures would be verified
/// one after another (a validator's sigverify stage also verifies a batch of packets in
/// parallel). `None` for every other request and for one that does not decode: its handler
/// answers it as it would alone.
fn check_batch(batch: &[Value]) -> Vec<Option<Checked>> {
    use rayon::prelude::*;
    let decoded: Vec<Option<VersionedTransaction>> = batch
        .iter()
        .map(|r| {
            let sends = r.get("method").and_then(Value::as_str) == Some("sendTransaction");
            sends.then(|| sent_transaction(r.get("params")?).ok())?
        })
        .collect();
    let check = |tx: Option<VersionedTransaction>| tx.map(Checked::verify);
    if decoded.iter().flatten().count() < 2 * PER_THREAD {
        return decoded.into_iter().map(check).collect();
    }
    decoded
        .into_par_iter()
        .with_min_len(PER_THREAD)
        .map(check)
        .collect()
}

/// The transaction of a `sendTransaction`'s params (the transaction, then its config).
fn sent_transaction(params: &Value) -> Result<VersionedTransaction, String> {
    json::transaction(params.get(0).unwrap_or(&Value::Null), params.get(1))
}

fn handle_one(node: &Node, req: &Value, checked: Option<Checked>) -> String {
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = req.get("method").and_then(Value::as_str) else {
        return error_reply(id, -32600, "Invalid request: no method");
    };
    let none = json!([]);
    let params = req.get("params").unwrap_or(&none);
    match dispatch(node, method, params, checked) {
        Ok(result) => json!({"jsonrpc": "2.0", "result": result, "id": id}).to_string(),
        Err(e) => {
            let mut error = json!({"code": e.code, "message": e.message});
            if let Some(data) = e.data {
                error["data"] = data;
            }
            json!({"jsonrpc": "2.0", "error": error, "id": id}).to_string()
        }
    }
}

fn with_context(slot: u64, value: Value) -> Value {
    json!({"context": {"apiVersion": "2.3.13", "slot": slot}, "value": value})
}

/// `checked`: a batch's `sendTransaction` whose transaction was decoded and verified already.
fn dispatch(node: &Node, method: &str, params: &Value, checked: Option<Checked>) -> RpcResult {
    let p = |i: usize| params.get(i);
    match method {
        "getHealth" => Ok(json!("ok")),
        "getVersion" => Ok(json!({"solana-core": "2.3.13", "feature-set": 0})),
        "getGenesisHash" => Ok(json!(node.chain().genesis_hash().to_string())),
        "getSlot" | "getBlockHeight" => Ok(json!(node.chain().slot())),
        "getTransactionCount" => Ok(json!(node.chain().transaction_count())),
        "getEpochInfo" => {
            let chain = node.chain();
            let slot = chain.slot();
            let per = crate::chain::SLOTS_PER_EPOCH;
            Ok(
                json!({"absoluteSlot": slot, "blockHeight": slot, "epoch": slot / per,
                      "slotIndex": slot % per, "slotsInEpoch": per,
                      "transactionCount": chain.transaction_count()}),
            )
        }
        "getLatestBlockhash" => {
            let chain = node.chain();
            let (hash, last_valid) = chain.latest_blockhash();
            Ok(with_context(
                chain.slot(),
                json!({"blockhash": hash.to_string(),
                                                 "lastValidBlockHeight": last_valid}),
            ))
        }
        "isBlockhashValid" => {
            let hash = p(0)
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| invalid("blockhash"))?;
            let chain = node.chain();
            Ok(with_context(
                chain.slot(),
                json!(chain.is_blockhash_valid(&hash)),
            ))
        }
        "getFeeForMessage" => Ok(with_context(node.chain().slot(), json!(5000))),
        "getMinimumBalanceForRentExemption" => {
            let len = p(0)
                .and_then(Value::as_u64)
                .ok_or_else(|| invalid("data length"))?;
            Ok(json!(node
                .chain()
                .svm
                .minimum_balance_for_rent_exemption(len as usize)))
        }
        "getBalance" => {
            let key = json::pubkey(p(0).unwrap_or(&Value::Null)).map_err(invalid)?;
            let chain = node.chain();
            let lamports = chain.get_account(&key).map(|a| a.lamports).unwrap_or(0);
            Ok(with_context(chain.slot(), json!(lamports)))
        }
        "getAccountInfo" => {
            let key = json::pubkey(p(0).unwrap_or(&Value::Null)).map_err(invalid)?;
            let enc = Encoding::from_config(p(1)).map_err(invalid)?;
            let chain = node.chain();
            let value = chain
                .get_account(&key)
                .map(|a| json::account(&a, enc))
                .unwrap_or(Value::Null);
            Ok(with_context(chain.slot(), value))
        }
        "getMultipleAccounts" => {
            let keys = p(0)
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("expected a list of pubkeys"))?;
            if keys.len() > 100 {
                return Err(invalid("at most 100 pubkeys"));
            }
            let enc = Encoding::from_config(p(1)).map_err(invalid)?;
            let chain = node.chain();
            let mut values = Vec::with_capacity(keys.len());
            for k in keys {
                let key = json::pubkey(k).map_err(invalid)?;
                values.push(
                    chain
                        .get_account(&key)
                        .map(|a| json::account(&a, enc))
                        .unwrap_or(Value::Null),
                );
            }
            Ok(with_context(chain.slot(), Value::Array(values)))
        }
        "requestAirdrop" => {
            let key = json::pubkey(p(0).unwrap_or(&Value::Null)).map_err(invalid)?;
            let lamports = p(1)
                .and_then(Value::as_u64)
                .ok_or_else(|| invalid("lamports"))?;
            if lamports == 0 || lamports > MAX_AIRDROP {
                return Err(invalid(format!("lamports must be 1 to {MAX_AIRDROP}")));
            }
            node.airdrop(&key, lamports)
                .map(|sig| json!(sig.to_string()))
                .map_err(|e| RpcError {
                    code: -32600,
                    message: format!("airdrop failed: {e}"),
                    data: None,
                })
        }
        "getSignatureStatuses" => {
            let sigs = p(0)
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("expected a list of signatures"))?;
            if sigs.len() > 256 {
                return Err(invalid("at most 256 signatures"));
            }
            let search = p(1)
                .and_then(|c| c.get("searchTransactionHistory"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let mut values = Vec::with_capacity(sigs.len());
            for s in sigs {
                let sig = signature(Some(s))?;
                let status = node.status(&sig).or_else(|| {
                    // past the recent window: only when asked, as a validator does
                    search.then(|| {
                        node.chain()
                            .history
                            .get(&sig)
                            .map(|e| (e.slot, json::error_or_null(e.err.as_ref())))
                    })?
                });
                values.push(match status {
                    None => Value::Null,
                    Some((slot, err)) => {
                        let status = json::status(&err);
                        // One node: what it processed is final.
                        json!({"slot": slot, "confirmations": null, "err": err, "status": status,
                               "confirmationStatus": "finalized"})
                    }
                });
            }
            Ok(with_context(node.chain().slot(), Value::Array(values)))
        }
        "sendTransaction" => {
            let tx = match checked {
                Some(tx) => tx,
                // verified here, on the front-end thread, before the chain's lock
                None => Checked::verify(sent_transaction(params).map_err(invalid)?),
            };
            let skip = p(1)
                .and_then(|c| c.get("skipPreflight"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            match node.send(tx, !skip) {
                Sent::Landed(sig) => Ok(json!(sig.to_string())),
                Sent::Refused(f) => Err(RpcError {
                    code: -32002,
                    message: format!(
                        "Transaction simulation failed: {}",
                        json::error_text(&f.err)
                    ),
                    data: Some(simulation_value(&Err(f))),
                }),
            }
        }
        "simulateTransaction" => {
            let tx = json::transaction(p(0).unwrap_or(&Value::Null), p(1)).map_err(invalid)?;
            let flag = |key: &str| {
                p(1).and_then(|c| c.get(key))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            };
            let (signatures, replace) = (flag("sigVerify"), flag("replaceRecentBlockhash"));
            if signatures && replace {
                return Err(invalid(
                    "sigVerify may not be used with replaceRecentBlockhash",
                ));
            }
            let checks = SimulationChecks {
                signatures,
                blockhash: !replace,
            };
            let result = node.simulate(tx, checks);
            Ok(with_context(node.chain().slot(), simulation_value(&result)))
        }
        "getProgramAccounts" => {
            let program = json::pubkey(p(0).unwrap_or(&Value::Null)).map_err(invalid)?;
            let config = p(1);
            let enc = Encoding::from_config(config).map_err(invalid)?;
            let filters = json::filters(config).map_err(invalid)?;
            let context = config
                .and_then(|c| c.get("withContext"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let chain = node.chain();
            let list: Vec<Value> = chain
                .program_accounts(&program, |data| filters.iter().all(|f| f.keeps(data)))
                .iter()
                .map(
                    |(key, a)| json!({"pubkey": key.to_string(), "account": json::account(a, enc)}),
                )
                .collect();
            if context {
                Ok(with_context(chain.slot(), Value::Array(list)))
            } else {
                Ok(Value::Array(list))
            }
        }
        "getTransaction" => {
            let sig = signature(p(0))?;
            let config = p(1);
            let format = json::TxFormat::from_config(config).map_err(invalid)?;
            let max_version = config
                .and_then(|c| c.get("maxSupportedTransactionVersion"))
                .and_then(Value::as_u64);
            let chain = node.chain();
            let Some(entry) = chain.history.get(&sig) else {
                return Ok(Value::Null);
            };
            if max_version.is_none() && !matches!(entry.tx.message, VersionedMessage::Legacy(_)) {
                return Err(version_refused());
            }
            let mut value = json::transaction_with_meta(entry, format);
            value["slot"] = json!(entry.slot);
            value["blockTime"] = json!(entry.block_time);
            if max_version.is_some() {
                value["version"] = version_of(entry);
            }
            Ok(value)
        }
        "getBlock" => {
            let slot = p(0)
                .and_then(Value::as_u64)
                .ok_or_else(|| invalid("slot"))?;
            let config = p(1);
            let format = json::TxFormat::from_config(config).map_err(invalid)?;
            let details = config
                .and_then(|c| c.get("transactionDetails"))
                .and_then(Value::as_str)
                .unwrap_or("full");
            if !matches!(details, "full" | "signatures" | "none") {
                return Err(invalid(format!(
                    "transactionDetails {details}: use full, signatures or none"
                )));
            }
            let max_version = config
                .and_then(|c| c.get("maxSupportedTransactionVersion"))
                .and_then(Value::as_u64);
            let rewards = config
                .and_then(|c| c.get("rewards"))
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let chain = node.chain();
            let entries: Vec<_> = chain.history.in_slot(slot).collect();
            let Some(first) = entries.first() else {
                return Err(no_block(slot));
            };
            if max_version.is_none()
                && entries
                    .iter()
                    .any(|e| !matches!(e.tx.message, VersionedMessage::Legacy(_)))
            {
                return Err(version_refused());
            }
            let mut block = json!({
                "blockhash": first.blockhash.to_string(), "blockHeight": slot,
                "blockTime": first.block_time, "parentSlot": first.parent_slot,
                "previousBlockhash": first.previous_blockhash.to_string(),
            });
            match details {
                "full" => {
                    block["transactions"] = entries
                        .iter()
                        .map(|e| {
                            let mut t = json::transaction_with_meta(e, format);
                            if max_version.is_some() {
                                t["version"] = version_of(e);
                            }
                            t
                        })
                        .collect();
                }
                "signatures" => {
                    block["signatures"] = entries
                        .iter()
                        .map(|e| json!(e.signature().to_string()))
                        .collect();
                }
                _ => {}
            }
            if rewards {
                block["rewards"] = json!([]);
            }
            Ok(block)
        }
        "getBlocks" => {
            let start = p(0)
                .and_then(Value::as_u64)
                .ok_or_else(|| invalid("start slot"))?;
            let chain = node.chain();
            let end = match p(1) {
                Some(v) if v.is_u64() => v.as_u64().unwrap_or(0),
                _ => chain.slot(),
            };
            if end < start || end - start > 500_000 {
                return Err(invalid(
                    "end slot must follow start, at most 500,000 after it",
                ));
            }
            Ok(json!(chain.history.block_slots(start, end)))
        }
        "getBlockTime" => {
            let slot = p(0)
                .and_then(Value::as_u64)
                .ok_or_else(|| invalid("slot"))?;
            let chain = node.chain();
            let time = chain.history.in_slot(slot).next().map(|e| e.block_time);
            time.map(|t| json!(t)).ok_or_else(|| no_block(slot))
        }
        "getSignaturesForAddress" => {
            let address = json::pubkey(p(0).unwrap_or(&Value::Null)).map_err(invalid)?;
            let config = p(1);
            let limit = match config.and_then(|c| c.get("limit")) {
                None | Some(Value::Null) => 1000,
                Some(v) => match v.as_u64() {
                    Some(n @ 1..=1000) => n as usize,
                    _ => return Err(invalid("limit must be 1 to 1000")),
                },
            };
            let before = optional_signature(config, "before")?;
            let until = optional_signature(config, "until")?;
            let chain = node.chain();
            let list: Vec<Value> = chain
                .history
                .for_address(&address, before.as_ref(), until.as_ref(), limit)
                .into_iter()
                .map(|e| {
                    json!({"signature": e.signature().to_string(), "slot": e.slot,
                           "err": json::error_or_null(e.err.as_ref()),
                           "memo": null, "blockTime": e.block_time,
                           "confirmationStatus": "finalized"})
                })
                .collect();
            Ok(Value::Array(list))
        }
        other => Err(RpcError {
            code: -32601,
            message: format!("Method not found: {other}"),
            data: None,
        }),
    }
}

/// A slot without a block: nothing landed in it (the chain makes no empty blocks), or it is
/// older than the history.
fn no_block(slot: u64) -> RpcError {
    RpcError {
        code: -32009,
        message: format!("Slot {slot} was skipped, or missing in long-term storage"),
        data: None,
    }
}

fn version_refused() -> RpcError {
    RpcError {
        code: -32015,
        message: "Transaction version (0) is not supported by the requesting client. Please \
                  try the request again with the following configuration parameter: \
                  \"maxSupportedTransactionVersion\": 0"
            .into(),
        data: None,
    }
}

fn version_of(e: &crate::history::TxEntry) -> Value {
    match e.tx.message {
        VersionedMessage::Legacy(_) => json!("legacy"),
        _ => json!(0),
    }
}

fn signature(v: Option<&Value>) -> Result<Signature, RpcError> {
    v.and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("signature"))
}

fn optional_signature(config: Option<&Value>, key: &str) -> Result<Option<Signature>, RpcError> {
    match config.and_then(|c| c.get(key)) {
        None | Some(Value::Null) => Ok(None),
        v => signature(v)
            .map(Some)
            .map_err(|_| invalid(format!("{key}: not a signature"))),
    }
}

fn simulation_value(
    result: &Result<litesvm::types::TransactionMetadata, litesvm::types::FailedTransactionMetadata>,
) -> Value {
    let (err, meta) = match result {
        Ok(meta) => (Value::Null, meta),
        Err(f) => (json::error(&f.err), &f.meta),
    };
    json!({"err": err, "logs": meta.logs, "accounts": null, "unitsConsumed": meta.compute_units_consumed,
           "returnData": null, "innerInstructions": null, "replacementBlockhash": null,
           "loadedAccountsDataSize": null})
}
