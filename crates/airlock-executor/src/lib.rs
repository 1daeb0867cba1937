//! The untrusted side of one run.
//!
//! The broker spawns `airlock __executor` with a socket on stdin. That process (the *stage*)
//! reads one [`ExecutorConfig`] frame, isolates itself layer by layer with `airlock-jail`, and
//! becomes a tiny supervisor whose only child is pid 1 of a fresh pid namespace. That child
//! either execs CPython with the guest bootstrap (`guest/bootstrap.py`, which installs the
//! seccomp filter after start-up and before untrusted code) or, in exec mode, installs the
//! exec seccomp profile and execs the command.
//!
//! **Architecture Invariant:** the stage never runs untrusted code before every layer is in
//! place, and it refuses (a `refused` notification, exit 70) rather than continue with one
//! missing.

pub mod assemble;
mod assemble_error;
mod assemble_image;
pub mod attest;
mod attested_start;
mod bind_source;
mod branch;
pub mod channel;
pub mod config;
mod container;
mod enter;
mod exit_status;
mod guest_code;
pub mod kernel_image;
pub mod machine_init;
mod refusal;
pub mod stage;
mod stage_restore;
mod supervise;
pub mod zygote;

pub use attest::Attestation;
pub use config::{AssembleConfig, DataBounds, ExecutorConfig, FsSpec, HostId, Mode, RlimitSpec};
pub use exit_status::EXIT_REFUSED;
pub use guest_code::{BOOTSTRAP_PY, ZYGOTE_PY};
pub use stage::stage_main;
