//! One run: prepare, spawn the executor stage, supervise it, tear it down, report.
//!
//! Preparing: `spec` (the request), `prepare` (`plan`, `prepare_image`, the crate's `image_env`)
//! into `prepared`. Launching — how a stage comes to exist: `spawn` (the process, its
//! socket and pipes), `launch` (cgroup, `setup` frame, a one-shot run's root) into a
//! `launched` stage. Supervising it to the end: `supervise` (the loop), `supervisor` (the
//! run's state and one handler per event), `inbound` (one handler per message from the
//! guest), `conclude` (teardown and the verdict). `cold` puts the three together.
//!
//! Its modules are private. What the rest of the broker builds its own runs from (the kernel's
//! cells, the warm pool, the zygote, the machine's processes) is the named API below: a run's
//! request and plan, preparing and launching a stage, the guest's first messages, supervising
//! a stage and reading its verdict, tearing it down. Only `spec` (a run's request) is a module
//! of its own to them too: the interpreter discovery that preparing a run uses runs a probe of
//! its own, and names the request without the rest of the run.
mod channel;
mod clock;
mod cold;
mod conclude;
mod disk_watch;
mod egress;
mod exception;
mod guest_messages;
mod inbound;
mod launch;
mod launched;
mod plan;
mod prepare;
mod prepare_image;
mod prepared;
mod spawn;
pub(crate) mod spec;
mod stage_proc;
mod supervise;
mod supervisor;
mod teardown;
mod tool_relay;
mod verdict;

// A run, start to end, for the broker's callers.
pub use cold::{run, run_cancellable};
pub use plan::program_fits;
pub use prepare::root_for;
pub use prepared::{NotStarted, Prepared, RunRoot};
pub use spec::{Cancel, Restricted, RunSpec, Workload};

// Preparing and launching a stage.
pub(crate) use launch::{launch, launch_via, launch_with};
pub(crate) use launched::Launched;
pub(crate) use prepare::prepare;
pub(crate) use prepared::not_started;
pub(crate) use spawn::{adopt_branch, StageForker, Via};
pub(crate) use stage_proc::{Adopted, StageProcess};

// The guest's messages and the channel they come over.
pub(crate) use channel::{open as open_channel, Inbox, Outbox};
pub(crate) use guest_messages::{check_ready, describe, refusal_of, EXECUTE_ID};
pub(crate) use tool_relay::{error_response as tool_error_response, ToolRelay};

// Supervising a stage, its verdict, its end.
pub(crate) use cold::run_probe;
pub(crate) use disk_watch::watch as watch_disk;
pub(crate) use supervise::{drive, supervise, supervise_via, Start, WATCHDOG_PERIOD};
pub(crate) use teardown::kill as kill_stage;
pub(crate) use verdict::{
    before_spawn as refused_before_spawn, result as verdict, End, Hint, Observed,
};
