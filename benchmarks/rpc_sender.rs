//! The load generator of `chain_tps.py --client rust`: sends JSON-RPC bodies that Python built
//! and signed beforehand over keep-alive HTTP/1.1 connections, one request in flight on each,
//! and reports each reply and round trip. Python's clients spend more CPU per transaction than
//! the node does, and on a 2-core machine they share its cores, so their bursts measure the
//! client; this one spends a few µs per request, so the node's front end decides the rate.
//! (wrk, oha and the like run for a duration against a fixed request and keep no replies;
//! here every request is a distinct signed transaction and every reply is checked.)
//!
//!     rpc_sender HOST:PORT CONNECTIONS
//!
//! Opens the connections (one after another, before any burst), prints `ready`, then for each
//! line on stdin, the path of a file with one request body per line, sends them all (the
//! connections take the next body as they get free) and prints one line of JSON:
//! `{"wall": s, "lat": [s per request], "replies": [reply bodies, in the file's order]}`.
//! A connection the node closed while it sat idle (both front ends close one after 120 s) is
//! opened again and the request sent again: the node never read it. Any other failure ends
//! the sender with the reason on stderr. Std only, built by chain_tps.py with rustc (no
//! crate, so no lockfile to change).

use std::io::{BufRead, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// A burst as the connections see it: the bodies and the index of the next one to send.
struct Burst {
    bodies: Vec<String>,
    next: AtomicUsize,
}

/// (index, round trip, reply body) of one request, or why the connection failed.
type Done = Result<(usize, Duration, String), String>;

/// Why a request failed: the connection was found closed before any byte of the reply
/// (the node had closed it, so it never read the request), or anything else.
enum Failure {
    Closed,
    Other(String),
}

struct Connection {
    stream: TcpStream,
    host: String,
    /// Bytes read past the last reply (none with one request in flight, but kept anyway).
    buf: Vec<u8>,
    /// Where each read lands, allocated once.
    chunk: Vec<u8>,
}

fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    Ok(stream)
}

impl Connection {
    fn open(addr: &str) -> std::io::Result<Self> {
        Ok(Self {
            stream: connect(addr)?,
            host: addr.to_string(),
            buf: Vec::with_capacity(64 << 10),
            chunk: vec![0; 64 << 10],
        })
    }

    /// The reply to `body`, on a new connection if the node had closed this one.
    fn request(&mut self, body: &str) -> Result<String, String> {
        match self.exchange(body) {
            Ok(reply) => Ok(reply),
            Err(Failure::Closed) => {
                self.stream = connect(&self.host).map_err(|e| format!("reconnect: {e}"))?;
                self.buf.clear();
                self.exchange(body).map_err(|f| match f {
                    Failure::Closed => "the node closed a new connection unanswered".into(),
                    Failure::Other(e) => e,
                })
            }
            Err(Failure::Other(e)) => Err(e),
        }
    }

    fn exchange(&mut self, body: &str) -> Result<String, Failure> {
        let head = format!(
            "POST / HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        let mut out = Vec::with_capacity(head.len() + body.len());
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(body.as_bytes());
        if let Err(e) = self.stream.write_all(&out) {
            return Err(match e.kind() {
                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset => Failure::Closed,
                _ => Failure::Other(format!("send: {e}")),
            });
        }
        self.reply()
    }

    /// The next reply's body; its status must be 200, its length announced and its body JSON.
    fn reply(&mut self) -> Result<String, Failure> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if let Err(e) = self.fill() {
                // nothing of a reply yet: the node closed the connection before reading
                return Err(if self.buf.is_empty() && e.is_none() {
                    Failure::Closed
                } else {
                    Failure::Other(e.unwrap_or_else(|| "the node closed the connection".into()))
                });
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
        let status = head.split(' ').nth(1).unwrap_or("");
        let mut length = None;
        for line in head.split("\r\n").skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let total = length
            .filter(|n| *n <= 1 << 30)
            .map(|n| end + n)
            .ok_or_else(|| {
                Failure::Other(format!("a reply without a usable Content-Length: {head:?}"))
            })?;
        while self.buf.len() < total {
            self.fill().map_err(|e| {
                Failure::Other(
                    e.unwrap_or_else(|| "the node closed the connection mid-reply".into()),
                )
            })?;
        }
        let body = String::from_utf8_lossy(&self.buf[end..total]).to_string();
        self.buf.drain(..total);
        if status != "200" {
            return Err(Failure::Other(format!("HTTP {status}: {body}")));
        }
        // pasted into the report line as it is, so it must be one JSON value on one line
        if !(body.starts_with('{') || body.starts_with('[')) || body.contains('\n') {
            return Err(Failure::Other(format!(
                "a reply that is not one line of JSON: {body:?}"
            )));
        }
        Ok(body)
    }

    /// Reads what has arrived; Err(None) when the node closed the connection (or reset it).
    fn fill(&mut self) -> Result<(), Option<String>> {
        match self.stream.read(&mut self.chunk) {
            Ok(0) => Err(None),
            Ok(n) => {
                self.buf.extend_from_slice(&self.chunk[..n]);
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => Err(None),
            Err(e) => Err(Some(format!("receive: {e}"))),
        }
    }
}

/// A connection's thread: takes bodies from each burst it is handed until none is left.
fn serve(mut conn: Connection, jobs: mpsc::Receiver<Arc<Burst>>, done: mpsc::Sender<Done>) {
    for burst in jobs {
        loop {
            let i = burst.next.fetch_add(1, Ordering::Relaxed);
            let Some(body) = burst.bodies.get(i) else {
                break;
            };
            let t = Instant::now();
            let reply = conn.request(body).map(|r| (i, t.elapsed(), r));
            let failed = reply.is_err();
            let _ = done.send(reply);
            if failed {
                return; // the connection is unusable; main reports the error and exits
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(addr), Some(Ok(n))) = (args.get(1), args.get(2).map(|n| n.parse::<usize>())) else {
        eprintln!("usage: rpc_sender HOST:PORT CONNECTIONS");
        std::process::exit(2);
    };
    let (done_tx, done) = mpsc::channel();
    let mut lanes = Vec::new();
    for _ in 0..n.max(1) {
        let conn = Connection::open(addr).unwrap_or_else(|e| {
            eprintln!("rpc_sender: cannot connect to {addr}: {e}");
            std::process::exit(1);
        });
        let (job_tx, jobs) = mpsc::channel();
        let done_tx = done_tx.clone();
        thread::spawn(move || serve(conn, jobs, done_tx));
        lanes.push(job_tx);
    }
    // Only the connections' threads send results: if every one of them ended, recv says so.
    drop(done_tx);
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        let path = line.expect("stdin");
        let text = std::fs::read_to_string(path.trim()).unwrap_or_else(|e| {
            eprintln!("rpc_sender: cannot read {path}: {e}");
            std::process::exit(1);
        });
        let bodies: Vec<String> = text.lines().map(str::to_string).collect();
        let count = bodies.len();
        let burst = Arc::new(Burst {
            bodies,
            next: AtomicUsize::new(0),
        });
        let t0 = Instant::now();
        for lane in lanes.iter().take(count) {
            lane.send(burst.clone())
                .expect("a connection's thread ended");
        }
        let mut replies = vec![String::new(); count];
        let mut lat = vec![0f64; count];
        for _ in 0..count {
            match done.recv().expect("every connection's thread ended") {
                Ok((i, rtt, reply)) => {
                    lat[i] = rtt.as_secs_f64();
                    replies[i] = reply;
                }
                Err(e) => {
                    eprintln!("rpc_sender: {e}");
                    std::process::exit(1);
                }
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        let lat: Vec<String> = lat.iter().map(|x| format!("{x:.9}")).collect();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{{\"wall\":{wall:.9},\"lat\":[{}],\"replies\":[{}]}}",
            lat.join(","),
            replies.join(",")
        );
        let _ = out.flush();
    }
}
