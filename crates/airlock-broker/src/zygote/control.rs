//! The zygote process and its control socket: start it, ask it for a stage, know whether it
//! is alive.
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use airlock_executor::zygote::{ABI, CGROUP2, CONTROL_FD, END, TASKS};
use airlock_executor::ZYGOTE_PY;
use airlock_jail::cgroup::EntryHandles;
use airlock_jail::fdpass;
use tokio::io::AsyncReadExt;

use super::error::ZygoteError;
use crate::run::{Adopted, StageForker, StageProcess};

/// How long the zygote may take to answer one request (it forks and answers in well under a
/// millisecond; this bounds a wedged one).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of the zygote's stderr kept to explain a failed start.
const MAX_DIAGNOSTIC: u64 = 4096;

/// A running zygote.
#[derive(Debug)]
pub(crate) struct Control {
    socket: Mutex<UnixStream>,
    process: Mutex<tokio::process::Child>,
    pid: i32,
    /// Set when a request was cut short or its answer not read: the zygote may still answer
    /// it, so the next answer on the socket would not be the next request's. Such a zygote is
    /// killed and counts as dead (the next run starts a fresh one).
    out_of_step: AtomicBool,
}

impl Control {
    /// Start `interpreter` as a zygote loading `library`; returns once it said it is ready.
    pub(super) async fn start(
        interpreter: &Path,
        library: &Path,
        timeout: Duration,
        build: i64,
    ) -> Result<Self, ZygoteError> {
        let failed = |e: std::io::Error| ZygoteError::Start(e.to_string());
        let (ours, theirs) = UnixStream::pair().map_err(failed)?;
        let mut cmd = tokio::process::Command::new(interpreter);
        cmd.args(["-I", "-B", "-S", "-c", ZYGOTE_PY])
            .arg(library)
            .arg(ABI.to_string())
            .arg(build.to_string())
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The zygote starts as a cold run's interpreter does: no disposition inherited.
        airlock_jail::process::default_signals_at_spawn(cmd.as_std_mut());
        fdpass::map_fd_at_spawn(cmd.as_std_mut(), theirs.into(), CONTROL_FD)
            .map_err(|e| ZygoteError::Start(e.to_string()))?;
        let mut child = cmd.spawn().map_err(failed)?;
        let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        let ready = tokio::time::timeout(timeout, ready(&mut child)).await;
        if !matches!(ready, Ok(Ok(()))) {
            let _ = child.start_kill();
            let why = diagnostic(&mut child).await;
            let _ = child.wait().await;
            return Err(ZygoteError::Start(match ready {
                Err(_) => format!("not ready within {timeout:?}{why}"),
                Ok(Err(e)) => format!("{e}{why}"),
                Ok(Ok(())) => why,
            }));
        }
        ours.set_read_timeout(Some(ANSWER_TIMEOUT))
            .map_err(failed)?;
        Ok(Self {
            socket: Mutex::new(ours),
            process: Mutex::new(child),
            pid,
            out_of_step: AtomicBool::new(false),
        })
    }

    /// The zygote's pid.
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the zygote still runs and its control socket is in step with its answers.
    pub(super) fn alive(&self) -> bool {
        !self.out_of_step.load(Ordering::SeqCst) && self.running()
    }

    /// Whether the zygote process still runs.
    fn running(&self) -> bool {
        matches!(self.process().try_wait(), Ok(None))
    }

    fn process(&self) -> MutexGuard<'_, tokio::process::Child> {
        self.process.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stop the zygote and reap it.
    pub(super) async fn stop(&self) {
        let _ = self.process().start_kill();
        for _ in 0..200 {
            if !self.running() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl StageForker for Control {
    /// Ask the zygote for a run's stage: `socket` becomes its stdin and each of `maps` its
    /// number; returns the stage (the broker's child) and the read ends of its stdout and
    /// stderr. Blocks for the zygote's answer (a fork: well under a millisecond).
    fn fork_stage(
        &self,
        socket: OwnedFd,
        maps: Vec<(OwnedFd, i32)>,
        cgroup: Option<EntryHandles>,
    ) -> std::io::Result<(StageProcess, OwnedFd, OwnedFd)> {
        let (out_r, out_w) = std::io::pipe()?;
        let (err_r, err_w) = std::io::pipe()?;
        let mut fds: Vec<(OwnedFd, u8)> = vec![(socket, 0), (out_w.into(), 1), (err_w.into(), 2)];
        for (fd, target) in maps {
            fds.push((fd, u8::try_from(target).map_err(std::io::Error::other)?));
        }
        if let Some(handles) = cgroup {
            fds.extend(handles.tasks.into_iter().map(|fd| (fd, TASKS)));
            fds.extend(handles.v2_dir.map(|fd| (fd, CGROUP2)));
        }
        let pid = {
            let mut control = self.socket.lock().unwrap_or_else(|e| e.into_inner());
            if self.out_of_step.load(Ordering::SeqCst) {
                return Err(std::io::Error::other(
                    "the zygote was given up on (a request it did not answer in time)",
                ));
            }
            match exchange(&mut control, &fds) {
                Ok(pid) => pid,
                Err(e) => {
                    // A request half sent, or one whose answer may still come: whatever the
                    // zygote says next would be taken for the next request's answer (another
                    // run's pid). It is not asked again; it is killed and replaced.
                    self.out_of_step.store(true, Ordering::SeqCst);
                    let _ = self.process().start_kill();
                    return Err(e);
                }
            }
        };
        // Our copies go now: the stage holds the write ends, so EOF means it is gone.
        drop(fds);
        if pid <= 0 {
            return Err(std::io::Error::other(format!(
                "the zygote could not fork a stage (error {})",
                -pid
            )));
        }
        let stage = StageProcess::Adopted(Adopted::new(pid)?);
        Ok((stage, out_r.into(), err_r.into()))
    }
}

/// Send one request (each descriptor with its tag, then [`END`]) and read the zygote's answer.
fn exchange(control: &mut UnixStream, fds: &[(OwnedFd, u8)]) -> std::io::Result<i32> {
    for (fd, tag) in fds {
        fdpass::send_tagged(control.as_fd(), *tag, Some(fd.as_fd()))
            .map_err(std::io::Error::other)?;
    }
    fdpass::send_tagged(control.as_fd(), END, None).map_err(std::io::Error::other)?;
    let mut answer = [0u8; 4];
    control.read_exact(&mut answer)?;
    Ok(i32::from_ne_bytes(answer))
}

/// Wait for the zygote's ready byte.
async fn ready(child: &mut tokio::process::Child) -> std::io::Result<()> {
    let Some(stdout) = child.stdout.as_mut() else {
        return Err(std::io::Error::other("no stdout"));
    };
    let mut byte = [0u8; 1];
    match stdout.read(&mut byte).await? {
        1 if byte[0] == b'R' => Ok(()),
        _ => Err(std::io::Error::other("the zygote exited during start-up")),
    }
}

/// What the zygote wrote on stderr, as a suffix for an error message.
async fn diagnostic(child: &mut tokio::process::Child) -> String {
    let Some(stderr) = child.stderr.take() else {
        return String::new();
    };
    let mut text = String::new();
    let mut limited = stderr.take(MAX_DIAGNOSTIC);
    let _ = tokio::time::timeout(Duration::from_secs(1), limited.read_to_string(&mut text)).await;
    match text.trim() {
        "" => String::new(),
        t => format!(": {t}"),
    }
}
