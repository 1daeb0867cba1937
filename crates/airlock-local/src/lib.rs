//! airlock-local: the `local` backend.
//!
//! airlock's own two-process sandbox (a trusted broker and a fresh unprivileged executor per
//! run, `airlock_broker::run`) behind the router's [`Backend`](airlock_router::Backend) and
//! [`Sandbox`](airlock_router::Sandbox) traits. A sandbox is one private host directory, the
//! work dir; every `exec` and `run_code` spawns a fresh executor on it, so a conversation
//! sandbox is a persistent work dir and a call sandbox a work dir created for the call and
//! removed on dispose.
//!
//! The file methods never follow a link: they resolve beneath an open handle on the work dir
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` and create with `O_EXCL` /
//! `O_NOFOLLOW` (see [`files`] and `airlock_jail::dirfd`). The rung is probed, never
//! configured: `container` where namespaces and cgroup limits both hold, else `os_process`
//! ([`rung`]).

pub mod assembly;
pub mod backend;
pub mod chunks;
pub mod config;
mod dir_ops;
pub mod egress;
pub mod files;
mod fork;
pub mod processes;
mod root;
pub mod run;
pub mod rung;
pub mod sandbox;
mod sandbox_trait;
pub mod sink;
pub mod snapshot;
pub mod tools;

pub use assembly::{assemble, Assembly, AssemblyError};
pub use backend::{LocalBackend, LocalRouter};
pub use config::LocalConfig;
pub use run::RunRequest;
pub use rung::{probe_rung, RungProbe};
pub use sandbox::{LocalSandbox, ToolsForRun};
pub use sink::{Existing, FileSystemSink};
pub use tools::{CommandBody, RegistryTools, RunDoor};
