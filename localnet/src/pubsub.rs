//! Solana PubSub over websockets: accountSubscribe, signatureSubscribe, slotSubscribe,
//! logsSubscribe and programSubscribe (and their unsubscribes). Each connection has its own thread; the chain side pushes
//! notifications into the subscribers' channels (`subscriptions.rs`) after it commits.

use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use solana_signature::Signature;
use tungstenite::{Message, WebSocket};

use crate::json::{self, error_reply, Encoding};
use crate::node::Node;
use crate::subscriptions::{Conn, Topic};

/// Accepts websocket connections until the process ends.
pub fn serve(listener: TcpListener, node: Arc<Node>) {
    for stream in listener.incoming().flatten() {
        let node = node.clone();
        std::thread::spawn(move || {
            if let Err(e) = connection(stream, &node) {
                eprintln!("psyche-localnet: pubsub connection ended: {e}");
            }
        });
    }
}

fn connection(stream: TcpStream, node: &Node) -> Result<(), String> {
    stream.set_nodelay(true).ok();
    let mut ws = tungstenite::accept(stream).map_err(|e| e.to_string())?;
    // Reads time out so the thread also forwards notifications.
    ws.get_ref()
        .set_read_timeout(Some(Duration::from_millis(10)))
        .map_err(|e| e.to_string())?;
    let (out, inbox): (Sender<String>, Receiver<String>) = channel();
    let conn = node.subscriptions.connect(out);
    let result = pump(&mut ws, node, &conn, &inbox);
    node.subscriptions.drop_connection(&conn);
    result
}

fn pump(
    ws: &mut WebSocket<TcpStream>,
    node: &Node,
    conn: &Conn,
    inbox: &Receiver<String>,
) -> Result<(), String> {
    loop {
        match ws.read() {
            Ok(Message::Text(text)) => {
                let reply = handle(node, conn, &text);
                ws.send(Message::text(reply)).map_err(|e| e.to_string())?;
            }
            Ok(Message::Close(_)) => return Ok(()),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(tungstenite::Error::ConnectionClosed)
            | Err(tungstenite::Error::AlreadyClosed)
            // A client that exits without a close frame has simply gone.
            | Err(tungstenite::Error::Protocol(
                tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
            )) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
        while let Ok(msg) = inbox.try_recv() {
            ws.send(Message::text(msg)).map_err(|e| e.to_string())?;
        }
    }
}

fn handle(node: &Node, conn: &Conn, text: &str) -> String {
    let req: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return error_reply(Value::Null, -32700, &format!("parse error: {e}")),
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req.get("method").and_then(Value::as_str).unwrap_or("");
    let params = req.get("params").cloned().unwrap_or(json!([]));
    let p0 = params.get(0);
    let subs = &node.subscriptions;
    let result: Result<Value, String> = match method {
        "accountSubscribe" => p0
            .ok_or_else(|| "missing account".to_string())
            .and_then(json::pubkey)
            .and_then(|key| {
                let enc = Encoding::from_config(params.get(1))?;
                Ok(json!(subs.add(Topic::Account(key, enc), conn)))
            }),
        "signatureSubscribe" => p0
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Signature>().ok())
            .ok_or_else(|| "invalid signature".to_string())
            .map(|sig| {
                let id = subs.add(Topic::Signature(sig), conn);
                // Already processed: notify at once, as a validator does for a known status.
                if let Some((slot, err)) = node.status(&sig) {
                    subs.signature_processed(slot, &sig, err);
                }
                json!(id)
            }),
        "slotSubscribe" => Ok(json!(subs.add(Topic::Slot, conn))),
        "logsSubscribe" => logs_filter(p0).map(|f| json!(subs.add(Topic::Logs(f), conn))),
        "programSubscribe" => p0
            .ok_or_else(|| "missing program id".to_string())
            .and_then(json::pubkey)
            .and_then(|program| {
                let enc = Encoding::from_config(params.get(1))?;
                let filters = json::filters(params.get(1))?;
                Ok(json!(subs.add(Topic::Program(program, enc, filters), conn)))
            }),
        "accountUnsubscribe"
        | "signatureUnsubscribe"
        | "slotUnsubscribe"
        | "logsUnsubscribe"
        | "programUnsubscribe" => p0
            .and_then(Value::as_u64)
            .ok_or_else(|| "invalid subscription id".to_string())
            .map(|sid| json!(subs.remove(sid, conn))),
        other => return error_reply(id, -32601, &format!("Method not found: {other}")),
    };
    match result {
        Ok(v) => json!({"jsonrpc": "2.0", "result": v, "id": id}).to_string(),
        Err(e) => error_reply(id, -32602, &format!("Invalid params: {e}")),
    }
}

/// `logsSubscribe`'s filter: "all" (or "allWithVotes": a local chain has no votes), or
/// `{"mentions": [one pubkey]}` (a validator takes exactly one).
fn logs_filter(v: Option<&Value>) -> Result<Option<solana_pubkey::Pubkey>, String> {
    match v {
        Some(Value::String(s)) if s == "all" || s == "allWithVotes" => Ok(None),
        Some(Value::Object(o)) => match o.get("mentions").and_then(Value::as_array) {
            Some(keys) if keys.len() == 1 => json::pubkey(&keys[0]).map(Some),
            _ => Err("mentions: give exactly one pubkey".into()),
        },
        _ => Err("filter: \"all\", \"allWithVotes\" or {\"mentions\": [pubkey]}".into()),
    }
}
