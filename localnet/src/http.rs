//! The HTTP/1.1 front end of the JSON-RPC: a thread per connection, keep-alive, requests parsed
//! with `httparse`. (tiny_http 0.12 was used first: its connection pool could leave a new
//! connection with no thread to serve it while others were kept alive, so a client opening
//! several connections at once hung; see benchmarks/README.md.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::json::error_reply;
use crate::node::Node;
use crate::rpc;

/// Largest request body accepted (a batch of transactions).
const MAX_BODY: usize = 4 << 20;
/// Largest request head (request line and headers).
const MAX_HEAD: usize = 64 << 10;
/// A keep-alive connection idle this long is closed.
const IDLE: Duration = Duration::from_secs(120);

/// Accepts connections until the process ends.
pub fn serve(listener: TcpListener, node: Arc<Node>) {
    for stream in listener.incoming().flatten() {
        let node = node.clone();
        std::thread::spawn(move || {
            let _ = connection(stream, &node);
        });
    }
}

struct Head {
    get: bool,
    length: usize,
    close: bool,
}

/// Reads one request head; None when the client closed the connection between requests.
fn read_head(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Result<Head, String>>> {
    let mut raw = Vec::new();
    loop {
        let before = raw.len();
        if reader.read_until(b'\n', &mut raw)? == 0 {
            return Ok(if raw.is_empty() {
                None
            } else {
                Some(Err("truncated request".into()))
            });
        }
        if raw[before..] == *b"\r\n" || raw[before..] == *b"\n" {
            if before == 0 {
                raw.clear(); // a stray empty line between requests
                continue;
            }
            break;
        }
        if raw.len() > MAX_HEAD {
            return Ok(Some(Err("request head too large".into())));
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(&raw), Ok(httparse::Status::Complete(_))) {
        return Ok(Some(Err("malformed request".into())));
    }
    let mut head = Head {
        get: req.method == Some("GET"),
        length: 0,
        close: req.version == Some(0),
    };
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        if h.name.eq_ignore_ascii_case("content-length") {
            match value.trim().parse() {
                Ok(n) => head.length = n,
                Err(_) => return Ok(Some(Err("invalid Content-Length".into()))),
            }
        } else if h.name.eq_ignore_ascii_case("connection") {
            head.close = value.eq_ignore_ascii_case("close");
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Ok(Some(Err(
                "chunked bodies are not supported: send Content-Length".into(),
            )));
        }
    }
    Ok(Some(Ok(head)))
}

fn respond(stream: &mut TcpStream, status: &str, body: &str, close: bool) -> std::io::Result<()> {
    // One write: head and body leave in the same segments (no wait on a delayed ACK).
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    stream.write_all(&out)
}

fn connection(stream: TcpStream, node: &Node) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IDLE))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let head = match read_head(&mut reader)? {
            None => return Ok(()),
            Some(Err(e)) => {
                let body = error_reply(serde_json::Value::Null, -32600, &e);
                return respond(&mut writer, "400 Bad Request", &body, true);
            }
            Some(Ok(head)) => head,
        };
        if head.length > MAX_BODY {
            let body = error_reply(serde_json::Value::Null, -32600, "request too large");
            return respond(&mut writer, "413 Payload Too Large", &body, true);
        }
        let mut body = vec![0; head.length];
        reader.read_exact(&mut body)?;
        let reply = if head.get {
            "ok".to_string() // `GET /health`, as validators answer it
        } else {
            match String::from_utf8(body) {
                Ok(text) => rpc::handle_body(node, &text),
                Err(_) => error_reply(
                    serde_json::Value::Null,
                    -32700,
                    "Parse error: body is not UTF-8",
                ),
            }
        };
        respond(&mut writer, "200 OK", &reply, head.close)?;
        if head.close {
            return Ok(());
        }
    }
}
