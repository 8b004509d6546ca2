//! The JSON-RPC over HTTP: `POST` with a request or a batch, `GET` (any path) answers `ok` as a
//! validator's `/health` does. Bodies are bounded. The RPC runs on the thread that read the
//! request: it waits for the chain's lock, which serializes every call anyway, and handing each
//! call to tokio's blocking pool cost ~50 µs of node CPU per transaction (two thread wake-ups),
//! 8% of the throughput of one-transaction requests (benchmarks/README.md, `chain_tps`). (Two
//! servers came before: tiny_http 0.12, whose pool could leave a new connection unserved while
//! others were kept alive, then a thread per connection over httparse.) It is a bare hyper
//! service, not an axum handler: a lone request, arriving at a front end whose caches the
//! client's work between requests has cooled, cost ~25 µs more node CPU through axum's handler,
//! extractors and boxed body (benchmarks/README.md, `chain_tps`, session 26).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::service::Service;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use crate::json::error_reply;
use crate::node::Node;
use crate::{rpc, server};

/// Largest request body accepted (a batch of transactions).
pub const MAX_BODY: usize = 4 << 20;
/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 1024;

type Reply = Response<Full<Bytes>>;

/// The JSON-RPC endpoint on `socket`, for the front-end threads to serve. One function takes
/// every path and method, so it is served by hyper alone, without a router or extractors.
pub fn listener(socket: std::net::TcpListener, node: Arc<Node>) -> server::Listener<Rpc> {
    server::Listener::new(socket, Rpc(node), MAX_CONNECTIONS, false)
}

/// The JSON-RPC service of one node.
#[derive(Clone)]
pub struct Rpc(Arc<Node>);

impl Service<Request<Incoming>> for Rpc {
    type Response = Reply;
    type Error = Infallible;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Reply, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let node = self.0.clone();
        Box::pin(async move { Ok(answer(&node, request).await) })
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    reply
}

fn json(status: StatusCode, body: String) -> Reply {
    reply(status, "application/json", body)
}

/// Refused before the body is read: the connection closes, so its unread body goes nowhere.
fn too_large(announced: Option<usize>) -> Reply {
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

async fn answer(node: &Node, request: Request<Incoming>) -> Reply {
    if request.method() == Method::GET {
        return reply(StatusCode::OK, "text/plain; charset=utf-8", "ok".into());
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
    let Ok(body) = Limited::new(request.into_body(), MAX_BODY).collect().await else {
        return too_large(None);
    };
    let body = body.to_bytes();
    let Ok(text) = std::str::from_utf8(&body) else {
        let body = error_reply(Value::Null, -32700, "Parse error: body is not UTF-8");
        return json(StatusCode::OK, body);
    };
    json(StatusCode::OK, rpc::handle_body(node, text))
}
