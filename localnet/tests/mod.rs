//! The runtime tests of the coordinator program on `LocalChain`, as one test binary: the
//! support (chain, signed transactions, run drivers, the SBF heap model) compiles once for
//! every suite. `cargo test -p psyche-localnet --test localnet suites::negative_join` runs one.

// Results carry litesvm's own (large) failure metadata, as the chain returns it.
#![allow(clippy::result_large_err)]

mod suites;
mod support;
