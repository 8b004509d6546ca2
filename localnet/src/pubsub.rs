//! Solana PubSub over websockets: accountSubscribe, signatureSubscribe, slotSubscribe,
//! logsSubscribe and programSubscribe (and their unsubscribes). Each connection is a task that
//! answers its requests and forwards the notifications the chain side queues for it
//! (`subscriptions.rs`) after it commits.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};
use solana_signature::Signature;
use tokio::sync::Semaphore;

use crate::json::{self, error_reply, Encoding};
use crate::node::Node;
use crate::server;
use crate::subscriptions::{Conn, Topic};

/// Websocket connections at once; one more is refused with 503.
const MAX_CONNECTIONS: usize = 1024;
/// Largest request message (a subscription request is a few hundred bytes).
const MAX_MESSAGE: usize = 64 << 10;
/// Close code for a client that reads its notifications too slowly (RFC 6455: policy).
const FELL_BEHIND: u16 = 1008;
/// A client that takes no bytes for this long (its socket buffer full) is gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

struct PubSub {
    node: Arc<Node>,
    open: Arc<Semaphore>,
}

/// The PubSub endpoint on `socket`, for the front-end threads to serve.
pub fn listener(
    socket: std::net::TcpListener,
    node: Arc<Node>,
) -> server::Listener<TowerToHyperService<Router>> {
    let state = Arc::new(PubSub {
        node,
        open: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
    });
    let app = Router::new().fallback(upgrade).with_state(state);
    // The HTTP side bounds only the handshakes: an upgraded connection leaves it.
    server::Listener::new(socket, TowerToHyperService::new(app), MAX_CONNECTIONS, true)
}

async fn upgrade(State(pubsub): State<Arc<PubSub>>, ws: WebSocketUpgrade) -> Response {
    let Ok(permit) = pubsub.open.clone().try_acquire_owned() else {
        let msg = format!("too many PubSub connections (at most {MAX_CONNECTIONS})");
        return (StatusCode::SERVICE_UNAVAILABLE, msg).into_response();
    };
    let node = pubsub.node.clone();
    ws.max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            connection(socket, node).await;
            drop(permit);
        })
}

async fn connection(mut socket: WebSocket, node: Arc<Node>) {
    let (conn, mut inbox) = node.subscriptions.connect();
    loop {
        let reply = tokio::select! {
            request = socket.recv() => match request {
                // On this thread, as the JSON-RPC calls are (http.rs): a subscription reads
                // at most a signature's status under the chain's lock.
                Some(Ok(Message::Text(text))) => handle(&node, &conn, &text),
                Some(Ok(Message::Close(_))) | None => break,
                // Pings are answered by the websocket layer; binary frames carry no requests.
                Some(Ok(_)) => continue,
                // A client that vanished without a close frame has simply gone.
                Some(Err(_)) => break,
            },
            Some(notification) = inbox.recv() => notification,
            () = conn.fell_behind() => {
                let close = CloseFrame {
                    code: FELL_BEHIND,
                    reason: "notifications not read fast enough".into(),
                };
                send(&mut socket, Message::Close(Some(close))).await;
                break;
            }
        };
        if !send(&mut socket, Message::Text(reply.into())).await {
            break;
        }
    }
    node.subscriptions.drop_connection(&conn);
}

/// False when the connection is done: closed, or not reading.
async fn send(socket: &mut WebSocket, message: Message) -> bool {
    matches!(
        tokio::time::timeout(SEND_TIMEOUT, socket.send(message)).await,
        Ok(Ok(()))
    )
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
