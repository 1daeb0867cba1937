//! One run: prepare, spawn the executor stage, supervise it, tear it down, report.
//!
//! Preparing: `spec` (the request), `prepare` (`plan`, `prepare_image`, `image_env`)
//! into `prepared`. Launching — how a stage comes to exist: `spawn` (the process, its
//! socket and pipes), `launch` (cgroup, `setup` frame, a one-shot run's root) into a
//! `launched` stage. Supervising it to the end: `supervise` (the loop), `supervisor` (the
//! run's state and one handler per event), `inbound` (one handler per message from the
//! guest), `conclude` (teardown and the verdict). `cold` puts the three together.
pub(crate) mod cgroup_attach;
pub(crate) mod channel;
mod clock;
pub(crate) mod cold;
mod conclude;
pub(crate) mod disk_watch;
mod egress;
pub(crate) mod exception;
pub(crate) mod guest_messages;
pub(crate) mod image_env;
mod inbound;
pub(crate) mod launch;
pub(crate) mod launched;
pub(crate) mod plan;
pub(crate) mod prepare;
pub(crate) mod prepare_image;
pub(crate) mod prepared;
pub(crate) mod spawn;
pub(crate) mod spec;
pub(crate) mod stage_proc;
pub(crate) mod supervise;
mod supervisor;
pub(crate) mod teardown;
pub(crate) mod tool_relay;
pub(crate) mod verdict;

pub use cold::{run, run_cancellable};
pub use plan::program_fits;
pub use prepare::root_for;
pub use prepared::{NotStarted, Prepared, RunRoot};
pub use spec::{Cancel, Restricted, RunSpec, Workload};
