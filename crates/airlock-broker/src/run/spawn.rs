//! How a run's stage process comes to exist: spawned as `airlock __executor`, or forked by the
//! zygote; with its socket, the sandbox's (or a one-shot run's hand-over) fds, the egress
//! channel, and readers on its stdout and stderr.
use std::os::fd::OwnedFd;
use std::time::Duration;

use airlock_executor::config::SANDBOX_CHANNEL_FD;
use airlock_jail::cgroup::EntryHandles;
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

use super::channel::{self, Inbox, Outbox};
use super::egress::{self, Egress};
use super::prepared::{Prepared, RunRoot};
use super::stage_proc::StageProcess;
use crate::limits::Limits;
use crate::output::{capture, Captured, CellPipe, Stream};
use crate::stage::{StageLaunch, StageOutput};

/// How long the readers get to drain the pipes once every process is gone.
const DRAIN: Duration = Duration::from_secs(2);

/// How the stage's stdout and stderr are read.
pub(crate) enum Readers {
    /// To EOF, once (a one-shot run).
    Whole(JoinHandle<(Captured, Captured)>),
    /// One capture per cell (a stateful kernel).
    Cells(CellPipe, CellPipe),
}

impl Readers {
    /// Stop reading (the stage will never run anything).
    pub(super) fn abort(&self) {
        if let Readers::Whole(h) = self {
            h.abort();
        }
    }

    /// Everything captured, for a run whose processes are all gone.
    pub(super) async fn finish(self) -> (Captured, Captured) {
        match self {
            Readers::Whole(h) => match tokio::time::timeout(DRAIN, h).await {
                Ok(Ok(pair)) => pair,
                _ => Default::default(),
            },
            Readers::Cells(out, err) => tokio::join!(out.end(), err.end()),
        }
    }
}

/// A stage just spawned (or forked): the process, its socket, its output readers.
pub(crate) struct Spawned {
    pub(crate) child: StageProcess,
    pub(crate) inbox: Inbox,
    pub(crate) outbox: Outbox,
    pub(crate) readers: Readers,
    pub(crate) io_tasks: [JoinHandle<()>; 1],
    /// The egress proxy of an allowlist run (aborted when dropped).
    pub(crate) egress: Option<Egress>,
}

/// The stage's end of a one-shot run's hand-over socket ([`RunRoot::Own`]).
pub(super) type HandOver = std::os::unix::net::UnixStream;

/// How a run's stage comes to exist.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Via<'a> {
    /// The broker spawns `airlock __executor`, which execs the interpreter (exec per run).
    Spawn,
    /// The zygote forks it from its pre-initialised interpreter.
    Zygote(&'a dyn StageForker),
}

/// What forks a run's stage from a pre-initialised interpreter: the zygote's control
/// (`crate::zygote`), which implements it, so that launching a stage does not name the zygote.
pub(crate) trait StageForker: std::fmt::Debug + Sync {
    /// Ask for a run's stage: `socket` becomes its stdin and each of `maps` its number, and it
    /// enters the `cgroup` it is given as it is born; returns the stage (the broker's child) and
    /// the read ends of its stdout and stderr. Blocks for the answer (a fork: well under a
    /// millisecond).
    fn fork_stage(
        &self,
        socket: OwnedFd,
        maps: Vec<(OwnedFd, i32)>,
        cgroup: Option<EntryHandles>,
    ) -> std::io::Result<(StageProcess, OwnedFd, OwnedFd)>;
}

/// Spawn `airlock __executor` with the run's socket on stdin and `maps` at their numbers;
/// the stage and its stdout and stderr.
fn spawn_stage(
    p: &Prepared,
    socket: OwnedFd,
    maps: Vec<(OwnedFd, i32)>,
) -> std::io::Result<(StageProcess, OwnedFd, OwnedFd)> {
    let mut cmd = crate::stage::async_command(StageLaunch {
        executor: &p.executor,
        socket,
        fds: maps,
        output: StageOutput::Piped,
        own_group: true,
    })?;
    let mut child = cmd.spawn()?;
    let missing = || std::io::Error::other("child pipes missing");
    let stdout = child.stdout.take().ok_or_else(missing)?.into_owned_fd()?;
    let stderr = child.stderr.take().ok_or_else(missing)?.into_owned_fd()?;
    Ok((StageProcess::Spawned(child), stdout, stderr))
}

/// Spawn (or fork, `via` the zygote) the stage with its socket, the sandbox's fds (or a one-shot
/// run's hand-over socket) and the egress channel, and start reading its output (`cells`: one
/// capture per cell); the stage, and the broker's end of a one-shot run's hand-over socket.
pub(super) fn spawn(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
    via: Via<'_>,
    entry: Option<EntryHandles>,
) -> std::io::Result<(Spawned, Option<HandOver>)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    let theirs: OwnedFd = theirs.into();
    let (mut maps, hand_over) = match &p.sandbox {
        RunRoot::Shared(sb) => (sb.join_fds()?, None),
        RunRoot::Own { .. } => {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
            (
                vec![(OwnedFd::from(theirs), SANDBOX_CHANNEL_FD)],
                Some(ours),
            )
        }
    };
    let egress = egress::attach(&mut maps, p, limits)?;
    if let Some(image) = &p.kernel_image {
        let fd = image.try_clone()?;
        maps.push((fd, airlock_executor::config::KERNEL_IMAGE_FD));
    }
    let (child, stdout, stderr) = match via {
        Via::Spawn => spawn_stage(p, theirs, maps)?,
        Via::Zygote(zygote) => zygote.fork_stage(theirs, maps, entry)?,
    };
    let readers = if cells {
        Readers::Cells(
            CellPipe::start(stdout, Stream::Stdout)?,
            CellPipe::start(stderr, Stream::Stderr)?,
        )
    } else {
        let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout)?;
        let stderr = tokio::net::unix::pipe::Receiver::from_owned_fd(stderr)?;
        let cap = limits.max_output_bytes;
        let out_tap = p.output.clone().map(|t| (t, Stream::Stdout));
        let err_tap = p.output.clone().map(|t| (t, Stream::Stderr));
        Readers::Whole(tokio::spawn(async move {
            tokio::join!(capture(stdout, cap, out_tap), capture(stderr, cap, err_tap))
        }))
    };
    let (inbox, outbox, flusher) = channel::open(UnixStream::from_std(ours)?);
    let spawned = Spawned {
        child,
        inbox,
        outbox,
        readers,
        io_tasks: [flusher],
        egress,
    };
    Ok((spawned, hand_over))
}

/// The broker's side of a forked kernel's branch `pid` (not its child: see
/// [`super::stage_proc::BranchProc`]): its socket and its own stdout and stderr pipes, read a
/// cell at a time as a kernel's are.
pub(crate) fn adopt_branch(
    pid: i32,
    socket: std::os::unix::net::UnixStream,
    stdout: OwnedFd,
    stderr: OwnedFd,
) -> std::io::Result<Spawned> {
    socket.set_nonblocking(true)?;
    let readers = Readers::Cells(
        CellPipe::start(stdout, Stream::Stdout)?,
        CellPipe::start(stderr, Stream::Stderr)?,
    );
    let (inbox, outbox, flusher) = channel::open(UnixStream::from_std(socket)?);
    Ok(Spawned {
        child: StageProcess::Branch(super::stage_proc::BranchProc::new(pid)?),
        inbox,
        outbox,
        readers,
        io_tasks: [flusher],
        egress: None,
    })
}
