//! Conformance suites: reusable probes that hold a backend to what it declares.
//!
//! Each suite is an async function taking a sandbox (or, for call scope, a backend) and
//! returning a [`ConformanceReport`]: every probe with its name, the reason it exists, and
//! whether it passed. Run them in a backend's own test suite against a real instance; nothing
//! runs them for you. Probe files live under a fresh `conformance-<id>` directory beneath the
//! work dir and are removed at the end of each suite.

mod call_scope;
mod egress;
mod exec;
mod files;
mod links;
mod report;
mod run_code;
mod scratch;

pub use call_scope::call_scope_suite;
pub use egress::{egress_suite, EgressProbe, Fetch};
pub use exec::exec_suite;
pub use files::{files_delete_suite, files_in_suite, files_out_suite};
pub use links::links_suite;
pub use report::{ConformanceReport, Outcome, Probe};
pub use run_code::run_code_suite;
