//! The accept loop both front ends share: hyper's HTTP/1.1 server (the JSON-RPC as a hyper
//! service, the PubSub as an axum router for its websocket upgrade), at most `limit`
//! connections at once, bounded request heads, keep-alive with an idle limit; and the threads
//! that run it.
//!
//! Each front-end thread is a single-threaded tokio runtime that accepts on the same listening
//! sockets and keeps the connections it accepted (as actix-web's workers do). On tokio's
//! work-stealing runtime a request woke one worker and often a second that found nothing to do:
//! one request at a time, that cost the node ~110 µs more CPU per request than the thread per
//! connection before it; on these threads (and without a router for the JSON-RPC) ~30 µs
//! (benchmarks/README.md, `chain_tps`: "one at a time").

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;

/// Largest request head (request line and headers); a larger one is answered 431.
const MAX_HEAD: usize = 64 << 10;
/// A connection's read buffer at most: bounds a head that never ends, and each read of a body.
const MAX_BUFFER: usize = 128 << 10;
/// A connection that sends no complete request head for this long is closed: an idle
/// keep-alive connection, or one that stalls inside a head.
const IDLE: Duration = Duration::from_secs(120);

/// How long a front-end thread waits after a failed accept (out of file descriptors).
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Connections that may wait to be accepted (std's and tokio's bind use 128): a burst of new
/// connections beyond it would wait for SYN retries, a second or more each.
const BACKLOG: i32 = 1024;

/// Listens on `addr` as tokio's bind does, but with a backlog of `BACKLOG`: the first of its
/// addresses that binds, with address reuse (a restarted node gets its port back at once).
pub fn bind(addr: &str) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let mut last = None;
    for addr in std::net::ToSocketAddrs::to_socket_addrs(addr)? {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        match socket
            .bind(&addr.into())
            .and_then(|()| socket.listen(BACKLOG))
        {
            Ok(()) => return Ok(socket.into()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no address to listen on")))
}

/// A listening socket and the service behind it, shared by every front-end thread: the
/// connections all of them hold at once are bounded together.
#[derive(Clone)]
pub struct Listener<App> {
    socket: Arc<std::net::TcpListener>,
    app: App,
    open: Arc<Semaphore>,
    /// Connections may leave HTTP (websockets).
    upgrades: bool,
}

impl<App, B> Listener<App>
where
    App: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    App::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    pub fn new(socket: std::net::TcpListener, app: App, limit: usize, upgrades: bool) -> Self {
        Self {
            socket: Arc::new(socket),
            app,
            open: Arc::new(Semaphore::new(limit)),
            upgrades,
        }
    }

    /// Serves on the calling thread's runtime until the process ends. At the limit of open
    /// connections the next one waits in the listen backlog until one closes, so a flood of
    /// connections costs a bounded amount of memory.
    pub async fn serve(self) {
        // Each thread polls its own descriptor of the one socket: a new connection wakes them
        // all, one accepts it, the others find nothing.
        let listener = self
            .socket
            .try_clone()
            .and_then(|s| {
                s.set_nonblocking(true)?;
                tokio::net::TcpListener::from_std(s)
            })
            .unwrap_or_else(|e| panic!("cannot poll the listening socket: {e}"));
        // Failed accepts since the last one that worked: (when the first failed, how many).
        let mut failing: Option<(std::time::Instant, u64)> = None;
        loop {
            let Ok(permit) = self.open.clone().acquire_owned().await else {
                return; // the semaphore is never closed
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => {
                    if let Some((since, n)) = failing.take() {
                        eprintln!(
                            "psyche-localnet: accepting again after {n} failed accepts in {:.1} s",
                            since.elapsed().as_secs_f64()
                        );
                    }
                    stream
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin, and say so
                    // once, not every 50 ms (the connection waits in the backlog meanwhile).
                    let (_, n) = failing.get_or_insert_with(|| {
                        let every = ACCEPT_RETRY.as_millis();
                        eprintln!("psyche-localnet: accept failed: {e}; retrying every {every} ms");
                        (std::time::Instant::now(), 0)
                    });
                    *n += 1;
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            // Replies leave at once, not after a delayed ACK.
            stream.set_nodelay(true).ok();
            let (service, upgrades) = (self.app.clone(), self.upgrades);
            tokio::spawn(async move {
                let mut http = http1::Builder::new();
                http.timer(TokioTimer::new())
                    .header_read_timeout(IDLE)
                    .max_header_size(MAX_HEAD)
                    .max_buf_size(MAX_BUFFER);
                let connection = http.serve_connection(TokioIo::new(stream), service);
                // A client that vanished mid-request is not the node's error.
                let _ = if upgrades {
                    connection.with_upgrades().await
                } else {
                    connection.await
                };
                drop(permit);
            });
        }
    }
}

/// Runs `serve()` on `threads` threads, each a single-threaded runtime, until the process
/// ends. Fails if a runtime cannot start, or once every thread has stopped.
pub fn run<F, Fut>(threads: usize, serve: F) -> std::io::Result<Infallible>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()>,
{
    let serve = Arc::new(serve);
    let mut handles = Vec::new();
    for i in 0..threads.max(1) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let serve = serve.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("rpc-{i}"))
                .spawn(move || runtime.block_on(serve()))?,
        );
    }
    // A thread ends only by a panic (printed as it happens); the others go on serving, and
    // once none is left the node has no front end.
    for handle in handles {
        let _ = handle.join();
    }
    Err(std::io::Error::other("every front-end thread has stopped"))
}
