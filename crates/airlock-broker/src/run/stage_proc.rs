//! A run's stage process, whichever way it was started: spawned by the broker (`airlock
//! __executor`), or forked by the zygote as the broker's child (`CLONE_PARENT`, see
//! `airlock_executor::zygote`). Both are the broker's children; the second is signalled and
//! reaped through a pidfd (a reused pid can never redirect it), and waited for by `SIGCHLD`,
//! since the async runtime did not spawn it.
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use airlock_jail::pidfd;
use tokio::signal::unix::{signal, Signal, SignalKind};

const SIGKILL: i32 = 9;

/// The stage of one run.
#[derive(Debug)]
pub(crate) enum StageProcess {
    /// Spawned by the broker.
    Spawned(tokio::process::Child),
    /// Forked by the zygote; the broker's child all the same.
    Adopted(Adopted),
    /// A forked kernel's branch: no stage, not the broker's child (see [`BranchProc`]).
    Branch(BranchProc),
}

/// A branch of a forked kernel: a clone of the kernel, whose parent is that kernel (kept
/// stopped for as long as any of its branches lives), held by a pidfd. It cannot be reaped
/// here: its end is the pidfd becoming readable (looked at every [`BRANCH_POLL`]), its status
/// read from its zombie.
#[derive(Debug)]
pub(crate) struct BranchProc {
    pid: i32,
    fd: OwnedFd,
    status: Option<ExitStatus>,
}

/// How often a waiter looks whether a branch ended.
const BRANCH_POLL: Duration = Duration::from_millis(5);

impl BranchProc {
    /// Take hold of the branch `pid` (which cannot be reaped while its parent is stopped).
    pub(crate) fn new(pid: i32) -> io::Result<Self> {
        let fd = pidfd::open(pid).map_err(io::Error::other)?;
        Ok(Self {
            pid,
            fd,
            status: None,
        })
    }

    fn ended(&mut self) -> ExitStatus {
        let status = airlock_jail::procfs::exit_status(self.pid).unwrap_or(SIGKILL);
        *self.status.insert(ExitStatus::from_raw(status))
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_some() {
            return Ok(self.status);
        }
        let exited =
            airlock_jail::fd::wait_readable(self.fd.as_fd(), 0).map_err(io::Error::other)?;
        Ok(exited.then(|| self.ended()))
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(s);
            }
            tokio::time::sleep(BRANCH_POLL).await;
        }
    }

    fn start_kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        pidfd::send_signal(self.fd.as_fd(), SIGKILL).map_err(io::Error::other)
    }
}

impl Drop for BranchProc {
    /// A branch nobody holds any more is killed (its parent, the stopped kernel, is ended
    /// with the last of its branches, and its pid namespace with it).
    fn drop(&mut self) {
        let _ = self.start_kill();
    }
}

/// A child of the broker it did not spawn itself, held by a pidfd.
#[derive(Debug)]
pub(crate) struct Adopted {
    pid: i32,
    fd: Option<OwnedFd>,
    /// Created before the first look at the process, so no exit is missed.
    exits: Signal,
    status: Option<ExitStatus>,
}

impl Adopted {
    /// Take hold of `pid`, a child of this process that nobody has reaped.
    pub(crate) fn new(pid: i32) -> io::Result<Self> {
        let exits = signal(SignalKind::child())?;
        let fd = pidfd::open(pid).map_err(io::Error::other)?;
        Ok(Self {
            pid,
            fd: Some(fd),
            exits,
            status: None,
        })
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_some() {
            return Ok(self.status);
        }
        let Some(fd) = &self.fd else {
            return Ok(self.status);
        };
        match pidfd::try_reap(fd.as_fd()).map_err(io::Error::other)? {
            Some(raw) => {
                self.status = Some(ExitStatus::from_raw(raw));
                // Reaped: the pid may be reused from now on, so the handle goes.
                self.fd = None;
                Ok(self.status)
            }
            None => Ok(None),
        }
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if self.exits.recv().await.is_none() {
                return Err(io::Error::other("SIGCHLD stream ended"));
            }
        }
    }

    fn start_kill(&mut self) -> io::Result<()> {
        match &self.fd {
            Some(fd) if self.status.is_none() => {
                pidfd::send_signal(fd.as_fd(), SIGKILL).map_err(io::Error::other)
            }
            _ => Ok(()),
        }
    }
}

impl Drop for Adopted {
    /// Like `kill_on_drop`: a stage nobody waits for any more is killed and reaped (off the
    /// async runtime: it dies promptly once killed, and its pid 1 with it).
    fn drop(&mut self) {
        let Some(fd) = self.fd.take() else { return };
        if self.status.is_some() {
            return;
        }
        let _ = pidfd::send_signal(fd.as_fd(), SIGKILL);
        std::thread::spawn(move || {
            for _ in 0..1000 {
                match pidfd::try_reap(fd.as_fd()) {
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                    _ => return,
                }
            }
        });
    }
}

impl StageProcess {
    /// The stage's pid, while it is not reaped.
    pub(crate) fn id(&self) -> Option<u32> {
        match self {
            Self::Spawned(c) => c.id(),
            Self::Adopted(a) if a.status.is_none() => u32::try_from(a.pid).ok(),
            Self::Adopted(_) => None,
            Self::Branch(b) if b.status.is_none() => u32::try_from(b.pid).ok(),
            Self::Branch(_) => None,
        }
    }

    /// Wait for the stage to exit and reap it (cancel-safe).
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Self::Spawned(c) => c.wait().await,
            Self::Adopted(a) => a.wait().await,
            Self::Branch(b) => b.wait().await,
        }
    }

    /// Reap the stage if it has exited.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Self::Spawned(c) => c.try_wait(),
            Self::Adopted(a) => a.try_wait(),
            Self::Branch(b) => b.try_wait(),
        }
    }

    /// SIGKILL to the stage (not waited for).
    pub(crate) fn start_kill(&mut self) -> io::Result<()> {
        match self {
            Self::Spawned(c) => c.start_kill(),
            Self::Adopted(a) => a.start_kill(),
            Self::Branch(b) => b.start_kill(),
        }
    }
}
