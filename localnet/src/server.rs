//! The accept loop both front ends share: hyper's HTTP/1.1 server under an axum router, at most
//! `limit` connections at once, bounded request heads, keep-alive with an idle limit.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Largest request head (request line and headers); a larger one is answered 431.
const MAX_HEAD: usize = 64 << 10;
/// A connection's read buffer at most: bounds a head that never ends, and each read of a body.
const MAX_BUFFER: usize = 128 << 10;
/// A connection that sends no complete request head for this long is closed: an idle
/// keep-alive connection, or one that stalls inside a head.
const IDLE: Duration = Duration::from_secs(120);

/// Serves `app` until the process ends. At `limit` open connections the next one waits in the
/// listen backlog until one closes, so a flood of connections costs a bounded amount of memory.
pub async fn serve(listener: TcpListener, app: Router, limit: usize) {
    let open = Arc::new(Semaphore::new(limit));
    loop {
        let Ok(permit) = open.clone().acquire_owned().await else {
            return; // the semaphore is never closed
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: wait rather than spin.
                eprintln!("psyche-localnet: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Replies leave at once, not after a delayed ACK.
        stream.set_nodelay(true).ok();
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(IDLE)
                .max_header_size(MAX_HEAD)
                .max_buf_size(MAX_BUFFER)
                .title_case_headers(true)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            // A client that vanished mid-request is not the node's error.
            let _ = connection.await;
            drop(permit);
        });
    }
}
