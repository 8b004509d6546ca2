//! psyche-localnet: a local Solana chain for development and tests. The Solana platform tools
//! (and so an SBF build of the program) are not available on our machines, so the coordinator
//! program runs natively inside a real Solana runtime (LiteSVM, agave 2.3), behind the
//! standard JSON-RPC and PubSub interfaces that clients (solana-py, anchorpy) speak.

pub mod chain;
mod cpi;
pub mod ix;
pub mod native;

pub use chain::LocalChain;
