//! The JSON-RPC over HTTP: `POST` with a request or a batch, `GET` (any path) answers `ok` as a
//! validator's `/health` does. Bodies are bounded. The RPC runs on the thread that read the
//! request: it waits for the chain's lock, which serializes every call anyway, and handing each
//! call to tokio's blocking pool cost ~50 µs of node CPU per transaction (two thread wake-ups),
//! 8% of the throughput of one-transaction requests (benchmarks/README.md, `chain_tps`). (Two
//! servers came before: tiny_http 0.12, whose pool could leave a new connection unserved while
//! others were kept alive, then a thread per connection over httparse.)

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::extract::State;
use axum::handler::Handler;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper::Request;
use serde_json::Value;
use tower_service::Service;

use crate::json::error_reply;
use crate::node::Node;
use crate::{rpc, server};

/// Largest request body accepted (a batch of transactions).
pub const MAX_BODY: usize = 4 << 20;
/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 1024;

/// The JSON-RPC endpoint on `socket`, for the front-end threads to serve. One handler takes
/// every path, so it is served without a router.
pub fn listener(
    socket: std::net::TcpListener,
    node: Arc<Node>,
) -> server::Listener<
    impl Service<Request<Incoming>, Response = Response, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static,
> {
    server::Listener::new(socket, request.with_state(node), MAX_CONNECTIONS)
}

fn json(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Refused before the body is read: the connection closes, so its unread body goes nowhere.
fn too_large(announced: Option<usize>) -> Response {
    let size = announced.map_or("more".into(), |n| format!("{n} bytes"));
    let body = error_reply(
        Value::Null,
        -32600,
        &format!("request too large: {size}, at most {MAX_BODY} bytes"),
    );
    let mut reply = json(StatusCode::PAYLOAD_TOO_LARGE, body);
    reply
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    reply
}

// The request whole rather than the `HeaderMap` extractor, which clones the headers.
async fn request(State(node): State<Arc<Node>>, request: Request<Body>) -> Response {
    if request.method() == Method::GET {
        return "ok".into_response();
    }
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_some_and(|n| n > MAX_BODY) {
        return too_large(announced);
    }
    // A chunked body has no announced length: it is cut off at the limit instead.
    let Ok(body) = to_bytes(request.into_body(), MAX_BODY).await else {
        return too_large(None);
    };
    let Ok(text) = std::str::from_utf8(&body) else {
        let body = error_reply(Value::Null, -32700, "Parse error: body is not UTF-8");
        return json(StatusCode::OK, body);
    };
    json(StatusCode::OK, rpc::handle_body(&node, text))
}
