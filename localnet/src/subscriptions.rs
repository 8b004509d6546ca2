//! The registry of PubSub subscriptions: who listens to what, and the notifications the node
//! pushes into their connections' outboxes after it commits. A leaf: the node fills it, the
//! websocket side (`pubsub.rs`) adds and removes subscriptions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, Notify};

use crate::json::{self, Encoding};

/// Notifications a connection may have waiting; one more and it has fallen behind.
const OUTBOX: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topic {
    Account(Pubkey, Encoding),
    Signature(Signature),
    Slot,
    /// The logs of every landed transaction (`None`: all), or of those naming an account.
    Logs(Option<Pubkey>),
    /// Every change of an account the program owns that passes the filters.
    Program(Pubkey, Encoding, Vec<json::Filter>),
}

/// Where a connection's notifications go: a bounded queue, so a client that does not read
/// costs a bounded amount of memory; when it is full the connection is told to close.
#[derive(Clone)]
struct Outbox {
    queue: mpsc::Sender<String>,
    behind: Arc<Notify>,
}

impl Outbox {
    /// False when the subscription ends here: its connection is gone or has fallen behind.
    fn push(&self, notification: String) -> bool {
        match self.queue.try_send(notification) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.behind.notify_one();
                false
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }
}

/// One websocket connection: its id and where its notifications go.
pub struct Conn {
    id: u64,
    out: Outbox,
}

impl Conn {
    /// Resolves once a notification could not be queued: the client reads too slowly, and
    /// the connection should close rather than silently miss notifications.
    pub async fn fell_behind(&self) {
        self.out.behind.notified().await
    }
}

struct Subscription {
    id: u64,
    /// The connection that asked for it.
    conn: u64,
    topic: Topic,
    out: Outbox,
}

/// Every live subscription of every connection.
#[derive(Default)]
pub struct Subscriptions {
    next_id: AtomicU64,
    next_conn: AtomicU64,
    subs: Mutex<Vec<Subscription>>,
}

fn notification(method: &str, id: u64, result: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method,
           "params": {"result": result, "subscription": id}})
    .to_string()
}

impl Subscriptions {
    /// A new connection, and the queue its notifications arrive in.
    pub fn connect(&self) -> (Conn, mpsc::Receiver<String>) {
        let (queue, inbox) = mpsc::channel(OUTBOX);
        let out = Outbox {
            queue,
            behind: Arc::new(Notify::new()),
        };
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        (Conn { id, out }, inbox)
    }

    pub fn add(&self, topic: Topic, conn: &Conn) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let out = conn.out.clone();
        self.subs.lock().unwrap().push(Subscription {
            id,
            conn: conn.id,
            topic,
            out,
        });
        id
    }

    /// Only the connection that subscribed may unsubscribe.
    pub fn remove(&self, id: u64, conn: &Conn) -> bool {
        let mut subs = self.subs.lock().unwrap();
        let before = subs.len();
        subs.retain(|s| !(s.id == id && s.conn == conn.id));
        subs.len() != before
    }

    /// Accounts someone listens to, so the chain reads only those after a transaction.
    pub fn watched_accounts(&self) -> Vec<Pubkey> {
        let subs = self.subs.lock().unwrap();
        let mut keys: Vec<Pubkey> = subs
            .iter()
            .filter_map(|s| match s.topic {
                Topic::Account(k, _) => Some(k),
                _ => None,
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Programs someone listens to (`programSubscribe`).
    pub fn watched_programs(&self) -> Vec<Pubkey> {
        let subs = self.subs.lock().unwrap();
        let mut keys: Vec<Pubkey> = subs
            .iter()
            .filter_map(|s| match s.topic {
                Topic::Program(k, ..) => Some(k),
                _ => None,
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// A landed transaction's logs, to those listening to all or to one of `accounts` (the
    /// accounts its message names).
    pub fn logs(
        &self,
        slot: u64,
        sig: &Signature,
        err: &Value,
        logs: &[String],
        accounts: &[Pubkey],
    ) {
        let mut subs = self.subs.lock().unwrap();
        subs.retain(|s| match &s.topic {
            Topic::Logs(filter) if filter.is_none_or(|k| accounts.contains(&k)) => {
                let value = json!({"context": {"slot": slot},
                                   "value": {"signature": sig.to_string(), "err": err,
                                             "logs": logs}});
                s.out.push(notification("logsNotification", s.id, value))
            }
            _ => true,
        });
    }

    /// An account of `account.owner` changed: to that program's subscribers whose filters
    /// keep it.
    pub fn program_account_changed(
        &self,
        slot: u64,
        key: &Pubkey,
        account: &solana_account::Account,
    ) {
        let mut subs = self.subs.lock().unwrap();
        subs.retain(|s| match &s.topic {
            Topic::Program(program, enc, filters)
                if *program == account.owner && filters.iter().all(|f| f.keeps(&account.data)) =>
            {
                let value = json!({"context": {"slot": slot},
                                   "value": {"pubkey": key.to_string(),
                                             "account": json::account(account, *enc)}});
                s.out.push(notification("programNotification", s.id, value))
            }
            _ => true,
        });
    }

    /// `account` is None when it was closed (notified as an empty system account).
    pub fn account_changed(
        &self,
        slot: u64,
        key: &Pubkey,
        account: Option<&solana_account::Account>,
    ) {
        let closed = solana_account::Account::default();
        let account = account.unwrap_or(&closed);
        let mut subs = self.subs.lock().unwrap();
        subs.retain(|s| match &s.topic {
            Topic::Account(k, enc) if k == key => {
                let value =
                    json!({"context": {"slot": slot}, "value": json::account(account, *enc)});
                s.out.push(notification("accountNotification", s.id, value))
            }
            _ => true,
        });
    }

    /// A processed transaction: its signature subscriptions fire once and end.
    pub fn signature_processed(&self, slot: u64, sig: &Signature, err: Value) {
        let mut subs = self.subs.lock().unwrap();
        subs.retain(|s| match &s.topic {
            Topic::Signature(k) if k == sig => {
                let value = json!({"context": {"slot": slot}, "value": {"err": err}});
                s.out
                    .push(notification("signatureNotification", s.id, value));
                false
            }
            _ => true,
        });
    }

    pub fn slot(&self, slot: u64) {
        let mut subs = self.subs.lock().unwrap();
        subs.retain(|s| match &s.topic {
            Topic::Slot => {
                let value = json!({"parent": slot.saturating_sub(1), "root": slot.saturating_sub(1), "slot": slot});
                s.out.push(notification("slotNotification", s.id, value))
            }
            _ => true,
        });
    }

    pub fn drop_connection(&self, conn: &Conn) {
        self.subs.lock().unwrap().retain(|s| s.conn != conn.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_lets_its_queue_fill_is_told_to_close_and_loses_its_subscriptions() {
        let subs = Subscriptions::default();
        let (conn, mut inbox) = subs.connect();
        let (_other, mut other_inbox) = subs.connect();
        subs.add(Topic::Slot, &conn);
        for slot in 0..OUTBOX as u64 {
            subs.slot(slot);
        }
        assert_eq!(
            subs.subs.lock().unwrap().len(),
            1,
            "a full queue is not yet behind"
        );
        subs.slot(OUTBOX as u64); // one more than the queue holds
        assert!(subs.subs.lock().unwrap().is_empty());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), conn.fell_behind())
                .await
                .expect("told to close");
        });
        assert_eq!(inbox.try_recv().map(|n| n.contains("\"slot\":0")), Ok(true));
        assert!(
            other_inbox.try_recv().is_err(),
            "other connections are untouched"
        );
    }
}
