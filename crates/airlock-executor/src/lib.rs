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
mod assemble_image;
pub mod attest;
pub mod channel;
pub mod config;
mod container;
pub mod stage;
pub mod zygote;

pub use attest::Attestation;
pub use config::{AssembleConfig, DataBounds, ExecutorConfig, FsSpec, HostId, Mode, RlimitSpec};
pub use stage::stage_main;

/// The guest bootstrap that CPython runs with `-c` before the untrusted program: the protocol,
/// seccomp, attestation and one-shot run (`guest/bootstrap.py`), the stateful kernel
/// (`guest/kernel.py`), then `main()`.
pub const BOOTSTRAP_PY: &str = concat!(
    include_str!("guest/bootstrap.py"),
    include_str!("guest/kernel.py"),
    "\nmain()\n"
);

/// What a zygote's interpreter runs (`-c`, with the library's path and [`zygote::ABI`] as its
/// arguments): the bootstrap and kernel, then `guest/zygote.py`, which forks a child per run
/// and runs `main()` in each once it is isolated.
pub const ZYGOTE_PY: &str = concat!(
    include_str!("guest/bootstrap.py"),
    include_str!("guest/kernel.py"),
    include_str!("guest/zygote.py"),
);

/// Exit status of a stage that refused to run (a layer could not be applied).
pub const EXIT_REFUSED: i32 = 70;
