//! psyche-localnet: a local Solana chain for development and tests. The Solana platform tools
//! (and so an SBF build of the program) are not available on our machines, so the coordinator
//! program runs natively inside a real Solana runtime (LiteSVM, agave 2.3), behind the
//! standard JSON-RPC and PubSub interfaces that clients (solana-py, anchorpy) speak.

// Results carry litesvm's own (large) failure metadata, returned as the runtime gives it.
#![allow(clippy::result_large_err)]

pub mod chain;
mod cpi;
pub mod history;
pub mod http;
pub mod ix;
pub mod json;
pub mod ledger;
pub mod native;
pub mod node;
pub mod pubsub;
pub mod rpc;
pub mod server;
pub mod sigverify;
pub mod subscriptions;

pub use chain::LocalChain;
