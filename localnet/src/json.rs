//! Solana's JSON wire encodings of accounts, errors and transactions, as solana-py and
//! solders parse them.

use base64::Engine as _;
use serde_json::{json, Value};
use solana_account::Account;
use solana_pubkey::Pubkey;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

pub const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Binary encodings a client may ask for (`jsonParsed` falls back to base64, as validators do
/// for accounts they cannot parse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Base58,
    Base64,
}

impl Encoding {
    pub fn from_config(config: Option<&Value>) -> Result<Self, String> {
        match config
            .and_then(|c| c.get("encoding"))
            .and_then(Value::as_str)
        {
            None | Some("base64") | Some("jsonParsed") => Ok(Self::Base64),
            Some("base58") | Some("binary") => Ok(Self::Base58),
            Some(other) => Err(format!("unsupported encoding: {other} (use base64)")),
        }
    }
}

pub fn account(a: &Account, enc: Encoding) -> Value {
    let data = match enc {
        Encoding::Base64 => json!([B64.encode(&a.data), "base64"]),
        Encoding::Base58 => json!([bs58::encode(&a.data).into_string(), "base58"]),
    };
    json!({
        "data": data,
        "executable": a.executable,
        "lamports": a.lamports,
        "owner": a.owner.to_string(),
        "rentEpoch": a.rent_epoch,
        "space": a.data.len(),
    })
}

/// A JSON-RPC error reply (the RPC and the PubSub answer alike).
pub fn error_reply(id: Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": id}).to_string()
}

pub fn error(e: &TransactionError) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}

/// A transaction's `err` field: its error, or null when it succeeded.
pub fn error_or_null(e: Option<&TransactionError>) -> Value {
    e.map(error).unwrap_or(Value::Null)
}

/// A transaction's `status` field from its `err` field: `{"Ok": null}` or `{"Err": err}`.
pub fn status(err: &Value) -> Value {
    if err.is_null() {
        json!({"Ok": null})
    } else {
        json!({"Err": err})
    }
}

/// The human line of a failed transaction ("Error processing Instruction 0: custom program
/// error: 0x1774").
pub fn error_text(e: &TransactionError) -> String {
    e.to_string()
}

/// A `getProgramAccounts` filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    DataSize(usize),
    Memcmp { offset: usize, bytes: Vec<u8> },
}

impl Filter {
    pub fn keeps(&self, data: &[u8]) -> bool {
        match self {
            Filter::DataSize(n) => data.len() == *n,
            Filter::Memcmp { offset, bytes } => data
                .get(*offset..)
                .is_some_and(|rest| rest.starts_with(bytes)),
        }
    }
}

/// The `filters` of a `getProgramAccounts` config: at most 4 of `{"dataSize": n}` and
/// `{"memcmp": {"offset": n, "bytes": "<base58>"}}` (`"encoding": "base64"` for base64 bytes;
/// at most 128 bytes), as a validator accepts them.
pub fn filters(config: Option<&Value>) -> Result<Vec<Filter>, String> {
    let Some(list) = config.and_then(|c| c.get("filters")) else {
        return Ok(Vec::new());
    };
    let list = match list {
        Value::Null => return Ok(Vec::new()),
        Value::Array(l) => l,
        _ => return Err("filters must be a list".into()),
    };
    if list.len() > 4 {
        return Err("too many filters provided; max 4".into());
    }
    list.iter()
        .map(|f| {
            if let Some(n) = f.get("dataSize") {
                let n = n.as_u64().ok_or("dataSize must be an integer")?;
                return Ok(Filter::DataSize(n as usize));
            }
            let m = f.get("memcmp").ok_or_else(|| format!("unknown filter: {f}"))?;
            let offset = m
                .get("offset")
                .and_then(Value::as_u64)
                .ok_or("memcmp.offset must be an integer")? as usize;
            let text = m
                .get("bytes")
                .and_then(Value::as_str)
                .ok_or("memcmp.bytes must be a string")?;
            let bytes = match m.get("encoding").and_then(Value::as_str) {
                None | Some("base58") => bs58::decode(text)
                    .into_vec()
                    .map_err(|e| format!("memcmp.bytes: invalid base58: {e}"))?,
                Some("base64") => B64
                    .decode(text)
                    .map_err(|e| format!("memcmp.bytes: invalid base64: {e}"))?,
                Some(other) => return Err(format!("memcmp: unsupported encoding {other}")),
            };
            if bytes.len() > 128 {
                return Err("memcmp.bytes: at most 128 bytes".into());
            }
            Ok(Filter::Memcmp { offset, bytes })
        })
        .collect()
}

pub fn pubkey(v: &Value) -> Result<Pubkey, String> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("invalid pubkey: {v}"))
}

/// A transaction as `sendTransaction`/`simulateTransaction` receive it.
pub fn transaction(v: &Value, config: Option<&Value>) -> Result<VersionedTransaction, String> {
    let text = v.as_str().ok_or("transaction must be a string")?;
    let bytes = match config
        .and_then(|c| c.get("encoding"))
        .and_then(Value::as_str)
    {
        Some("base64") => B64
            .decode(text)
            .map_err(|e| format!("invalid base64: {e}"))?,
        None | Some("base58") => bs58::decode(text)
            .into_vec()
            .map_err(|e| format!("invalid base58: {e}"))?,
        Some(other) => return Err(format!("unsupported encoding: {other}")),
    };
    if bytes.len() > 1232 {
        return Err(format!(
            "transaction too large: {} bytes (max 1232)",
            bytes.len()
        ));
    }
    bincode::deserialize(&bytes).map_err(|e| format!("failed to deserialize transaction: {e}"))
}

/// How `getTransaction` encodes the transaction: as JSON (the default; `jsonParsed` is
/// answered as JSON too: nothing here parses instructions), or its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxFormat {
    Json,
    Bytes(Encoding),
}

impl TxFormat {
    pub fn from_config(config: Option<&Value>) -> Result<Self, String> {
        match config
            .and_then(|c| c.get("encoding"))
            .and_then(Value::as_str)
        {
            None | Some("json") | Some("jsonParsed") => Ok(Self::Json),
            Some("base64") => Ok(Self::Bytes(Encoding::Base64)),
            Some("base58") => Ok(Self::Bytes(Encoding::Base58)),
            Some(other) => Err(format!("unsupported encoding: {other}")),
        }
    }
}

fn compiled(ix: &solana_message::compiled_instruction::CompiledInstruction) -> Value {
    json!({"programIdIndex": ix.program_id_index, "accounts": ix.accounts,
           "data": bs58::encode(&ix.data).into_string(), "stackHeight": null})
}

/// A transaction as validators encode it for `getTransaction` and `getBlock`.
fn ui_transaction(tx: &VersionedTransaction, format: TxFormat) -> Value {
    use solana_message::VersionedMessage;
    let bytes = || bincode::serialize(tx).expect("a transaction serializes");
    match format {
        TxFormat::Bytes(Encoding::Base64) => json!([B64.encode(bytes()), "base64"]),
        TxFormat::Bytes(Encoding::Base58) => {
            json!([bs58::encode(bytes()).into_string(), "base58"])
        }
        TxFormat::Json => {
            let m = &tx.message;
            let h = m.header();
            let mut message = json!({
                "header": {"numRequiredSignatures": h.num_required_signatures,
                           "numReadonlySignedAccounts": h.num_readonly_signed_accounts,
                           "numReadonlyUnsignedAccounts": h.num_readonly_unsigned_accounts},
                "accountKeys": m.static_account_keys().iter().map(|k| k.to_string())
                    .collect::<Vec<_>>(),
                "recentBlockhash": m.recent_blockhash().to_string(),
                "instructions": m.instructions().iter().map(compiled).collect::<Vec<_>>(),
            });
            if let VersionedMessage::V0(v0) = m {
                message["addressTableLookups"] = Value::Array(
                    v0.address_table_lookups
                        .iter()
                        .map(|l| {
                            json!({"accountKey": l.account_key.to_string(),
                                   "writableIndexes": l.writable_indexes,
                                   "readonlyIndexes": l.readonly_indexes})
                        })
                        .collect(),
                );
            }
            json!({"signatures": tx.signatures.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                   "message": message})
        }
    }
}

/// `{"transaction", "meta"}` of a landed transaction (the caller adds slot and block time).
pub fn transaction_with_meta(e: &crate::history::TxEntry, format: TxFormat) -> Value {
    let err = error_or_null(e.err.as_ref());
    let status = status(&err);
    let inner: Vec<Value> = e
        .inner
        .iter()
        .enumerate()
        .filter(|(_, list)| !list.is_empty())
        .map(|(i, list)| {
            let ixs: Vec<Value> = list
                .iter()
                .map(|ii| {
                    let mut v = compiled(&ii.instruction);
                    v["stackHeight"] = json!(ii.stack_height);
                    v
                })
                .collect();
            json!({"index": i, "instructions": ixs})
        })
        .collect();
    let return_data = e.return_data.as_ref().map_or(Value::Null, |(program, data)| {
        json!({"programId": program.to_string(), "data": [B64.encode(data), "base64"]})
    });
    json!({
        "transaction": ui_transaction(&e.tx, format),
        "meta": {
            "err": err, "status": status, "fee": e.fee,
            "preBalances": e.pre_balances, "postBalances": e.post_balances,
            "innerInstructions": inner, "logMessages": e.logs,
            "preTokenBalances": [], "postTokenBalances": [], "rewards": [],
            "loadedAddresses": {"writable": [], "readonly": []},
            "returnData": return_data, "computeUnitsConsumed": e.units,
        },
    })
}
