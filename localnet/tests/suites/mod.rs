//! The suites, one file per subject.
//!
//! - `compute_units`: the SBF build's compute units per instruction (a benchmark, ignored).
//! - `instructions`: each instruction's effect on the accounts, checked against the core.
//! - `vectors`: every conformance vector replayed as instructions.
//! - `negative_<instruction>`: each instruction's refusals by name, leaving every account as
//!   it was.
//! - `fuzz`: random and mutated instructions while a run goes through its epochs.
//! - `heap`: the SBF heap each instruction would use.
//! - `ledger`: a chain reopened from its ledger.
//! - `program_accounts`: `getProgramAccounts` lists a run's contributor accounts.
//! - `sbf_probe`: the SBF build's i128 helpers under the VM, over 0 to 256 calls.
//! - `signatures`: signatures verified before the chain's lock end every transaction as the
//!   bank's own check did.
//! - `runtime_smoke`: a run created, started, joined and ticked.

mod compute_units;
mod fuzz;
mod heap;
mod history;
mod instructions;
mod ledger;
mod negative_accounts;
mod negative_authorizations;
mod negative_checkpoint;
mod negative_data;
mod negative_evidence;
mod negative_free;
mod negative_health;
mod negative_init;
mod negative_join;
mod negative_known_issues;
mod negative_owner;
mod negative_points;
mod negative_resync;
mod negative_synced;
mod negative_tick;
mod negative_withdraw;
mod negative_witness;
mod program_accounts;
mod runtime_smoke;
mod sbf_probe;
mod signatures;
mod vectors;
