//! The one way the broker starts a stage: `airlock __executor`, the hidden subcommand every
//! stage is (a run's, a sandbox machine's init, a background process's, the kernel's sealer, a
//! sandbox root's assembler). Each starts the same way: an empty environment, its control
//! socket as stdin, the descriptors it needs at their fixed numbers (nothing else inherited:
//! every other descriptor of the broker is close-on-exec), and its output piped or discarded.
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};

/// Where a stage's stdout and stderr go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StageOutput {
    /// Pipes the broker reads (a run's output, a process's).
    Piped,
    /// Nowhere (the stage answers on its socket).
    Discarded,
}

/// How one stage is started.
#[derive(Debug)]
pub(crate) struct StageLaunch<'a> {
    /// The `airlock` binary.
    pub(crate) executor: &'a Path,
    /// Its control socket, its stdin.
    pub(crate) socket: OwnedFd,
    /// Descriptors it is handed, each at its number.
    pub(crate) fds: Vec<(OwnedFd, i32)>,
    /// Where its output goes.
    pub(crate) output: StageOutput,
    /// In a process group of its own (so a signal to the group reaches all it forks).
    pub(crate) own_group: bool,
}

/// The stage's command, to spawn on a blocking thread.
pub(crate) fn command(launch: StageLaunch<'_>) -> io::Result<Command> {
    let mut cmd = Command::new(launch.executor);
    let out = || match launch.output {
        StageOutput::Piped => Stdio::piped(),
        StageOutput::Discarded => Stdio::null(),
    };
    cmd.arg("__executor")
        .env_clear()
        .stdin(Stdio::from(launch.socket))
        .stdout(out())
        .stderr(out());
    if launch.own_group {
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    }
    if !launch.fds.is_empty() {
        airlock_jail::fdpass::map_fds_at_spawn(&mut cmd, launch.fds).map_err(io::Error::other)?;
    }
    Ok(cmd)
}

/// The same, to spawn on the runtime: killed if dropped before it is reaped.
pub(crate) fn async_command(launch: StageLaunch<'_>) -> io::Result<tokio::process::Command> {
    let mut cmd = tokio::process::Command::from(command(launch)?);
    cmd.kill_on_drop(true);
    Ok(cmd)
}
