//! One background process of a sandbox's machine: started like a run's command (prepared by
//! the same code, the same layers, attested before it starts), but a process of the machine's
//! pid namespace that lives until it exits, is signalled, or its sandbox ends.
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use airlock_executor::attest::{own_namespaces, Attestation, PidRule};
use airlock_executor::config::{Joining, PROCESS_STDIO_FD, SETUP_METHOD};
use airlock_jail::{pidfd, process::KILL_GROUP_SIGNAL, pty};
use airlock_protocol::Message;
use tokio::sync::watch;

use super::init::Machine;
use super::output_log::{Exit, OutputLog};
use super::stdio::{self, Stdin};
use crate::limits::Limits;
use crate::run::{open_channel, prepare, refusal_of, run_probe, Inbox, RunSpec, Workload};
use crate::sandbox_fs::SandboxFs;
use crate::stage::{StageLaunch, StageOutput};

/// How long a process's stage may take from spawn to its attestation.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the output readers get to drain once the process is gone.
const DRAIN: Duration = Duration::from_millis(300);
/// Signals a client may send (SIGKILL reaches the whole group through the stage).
pub const SIGNALS: [(&str, i32); 8] = [
    ("SIGTERM", 15),
    ("SIGINT", 2),
    ("SIGHUP", 1),
    ("SIGQUIT", 3),
    ("SIGUSR1", 10),
    ("SIGUSR2", 12),
    ("SIGCONT", 18),
    ("SIGKILL", 9),
];

/// What to start.
#[derive(Debug, Clone)]
pub struct ProcessRequest {
    /// The command and its arguments (argv[0] resolved in the sandbox as a run's is).
    pub argv: Vec<String>,
    /// Working directory relative to /work.
    pub cwd: Option<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// Whether stdin is a pipe the client writes (else /dev/null).
    pub stdin: bool,
    /// A terminal of this size (rows, cols) instead of pipes.
    pub pty: Option<(u16, u16)>,
    /// Killed after this long, if given.
    pub timeout: Option<Duration>,
    /// The per-process limits (rlimits; memory as the address-space backstop).
    pub limits: Limits,
    /// The `airlock` binary.
    pub executor: PathBuf,
}

/// Why a process did not start.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Refused before or during start (bad command, a layer missing, attestation failed).
    #[error("{0}")]
    Refused(String),
    /// The stage could not be spawned or talked to.
    #[error("cannot start the process: {0}")]
    Io(#[from] io::Error),
}

/// A live or ended background process.
#[derive(Debug)]
pub struct Process {
    /// Its id within the sandbox.
    pub id: String,
    /// What it runs.
    pub argv: Vec<String>,
    /// Whether it has a terminal.
    pub pty: bool,
    /// When it started.
    pub started_at: SystemTime,
    /// Its output.
    pub output: Arc<OutputLog>,
    stage: Mutex<Option<OwnedFd>>,
    stdin: tokio::sync::Mutex<Option<Stdin>>,
    master: Option<Arc<tokio::io::unix::AsyncFd<std::fs::File>>>,
    exit: watch::Receiver<Option<Exit>>,
}

/// Start `req` as process `id` in the machine of `fs`.
pub async fn start(
    id: String,
    fs: &Arc<SandboxFs>,
    machine: &Arc<Machine>,
    req: ProcessRequest,
) -> Result<Arc<Process>, ProcessError> {
    let spec = RunSpec {
        workload: Workload::Command {
            argv: req.argv.clone(),
        },
        limits: req.limits.clone(),
        sandbox: Some(Arc::clone(fs)),
        image: None,
        cwd: req.cwd.clone(),
        env: req.env.clone(),
        executor: req.executor.clone(),
        output: None,
        restricted: None,
    };
    let mut prepared = prepare(&spec, run_probe)
        .await
        .map_err(|n| ProcessError::Refused(n.message))?;
    let (stdio_kind, ends) = stdio::open(req.stdin, req.pty)?;
    prepared.config.machine = Some(Joining::Process { stdio: stdio_kind });
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    let mut maps = fs.join_fds()?;
    if let Some(fd) = ends.theirs {
        maps.push((fd, PROCESS_STDIO_FD));
    }
    let mut cmd = crate::stage::async_command(StageLaunch {
        executor: &prepared.executor,
        socket: OwnedFd::from(theirs),
        fds: maps,
        output: StageOutput::Piped,
        own_group: true,
    })?;
    let mut child = cmd.spawn()?;
    drop(cmd);
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    let handle = pidfd::open(pid).map_err(io::Error::other)?;
    // Into the machine's cgroup before the stage reads its setup (so before it forks).
    machine
        .adopt(pid)
        .map_err(|e| ProcessError::Refused(e.to_string()))?;
    let (mut inbox, outbox, flusher) = open_channel(tokio::net::UnixStream::from_std(ours)?);
    let setup = serde_json::to_value(&prepared.config).unwrap_or_default();
    let _ = outbox.try_send(Message::notification(SETUP_METHOD, Some(setup)));
    let ready = tokio::time::timeout(READY_TIMEOUT, attested(&mut inbox, machine)).await;
    let refused = match ready {
        Ok(Ok(())) => None,
        Ok(Err(why)) => Some(why),
        Err(_) => Some("the process's stage did not attest in time".into()),
    };
    if let Some(why) = refused {
        let _ = child.start_kill();
        let _ = child.wait().await;
        flusher.abort();
        return Err(ProcessError::Refused(why));
    }
    let _ = outbox.try_send(Message::notification("start", None));
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let (exit_tx, exit_rx) = watch::channel(None);
    let process = Arc::new(Process {
        id,
        argv: req.argv,
        pty: req.pty.is_some(),
        started_at: SystemTime::now(),
        output: Arc::new(OutputLog::default()),
        stage: Mutex::new(Some(handle)),
        stdin: tokio::sync::Mutex::new(ends.stdin),
        master: ends.master.clone(),
        exit: exit_rx,
    });
    let readers = stdio::read_output(&process.output, stdout, stderr, ends.master);
    tokio::spawn(watch_to_the_end(
        Arc::clone(&process),
        child,
        readers,
        exit_tx,
        req.timeout,
        flusher,
    ));
    Ok(process)
}

/// The stage's `ready` with an attestation that holds for a process of `machine`.
async fn attested(inbox: &mut Inbox, machine: &Machine) -> Result<(), String> {
    match inbox.recv().await {
        Some(Ok(Some(Message::Notification(n)))) if n.method == "ready" => {
            let proof: Attestation = serde_json::from_value(n.params.unwrap_or_default())
                .map_err(|e| format!("bad attestation: {e}"))?;
            proof
                .verify_as(&own_namespaces(), PidRule::In(machine.pid_namespace()))
                .map_err(|p| format!("attestation failed: {}", p.join("; ")))
        }
        Some(Ok(Some(Message::Notification(n)))) if n.method == "refused" => {
            Err(refusal_of(n.params))
        }
        Some(Ok(Some(_))) => Err("protocol violation before start".into()),
        _ => Err("the process's stage exited before it was ready".into()),
    }
}

/// Wait for the stage (the process) to end or its timeout, drain the output, say how it ended.
async fn watch_to_the_end(
    process: Arc<Process>,
    mut child: tokio::process::Child,
    readers: tokio::task::JoinHandle<()>,
    exit_tx: watch::Sender<Option<Exit>>,
    timeout: Option<Duration>,
    flusher: tokio::task::JoinHandle<()>,
) {
    let status = match timeout {
        Some(t) => match tokio::time::timeout(t, child.wait()).await {
            Ok(s) => s,
            Err(_) => {
                process.signal_raw(KILL_GROUP_SIGNAL);
                let _ = child.start_kill();
                child.wait().await
            }
        },
        None => child.wait().await,
    };
    // Reaped: the pid may be reused, so the handle goes before anything else can use it.
    drop(
        process
            .stage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(),
    );
    flusher.abort();
    let exit = match status {
        Ok(s) => Exit {
            exit_code: s.code(),
            signal: s.signal(),
        },
        Err(_) => Exit {
            exit_code: None,
            signal: Some(9),
        },
    };
    let _ = tokio::time::timeout(DRAIN, readers).await;
    process.output.exited(exit);
    exit_tx.send_replace(Some(exit));
}

impl Process {
    /// How it ended, or None while it runs.
    #[must_use]
    pub fn exit(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    /// Wait until it ends, at most `timeout`; how it ended, or None if it still runs.
    pub async fn wait(&self, timeout: Duration) -> Option<Exit> {
        let mut rx = self.exit.clone();
        let ended = tokio::time::timeout(timeout, rx.wait_for(Option::is_some)).await;
        match ended {
            Ok(Ok(e)) => *e,
            _ => self.exit(),
        }
    }

    /// Send `signal` (one of [`SIGNALS`]) to the process's group; false if it has ended.
    pub fn signal(&self, signal: i32) -> bool {
        let via_stage = if signal == 9 {
            KILL_GROUP_SIGNAL
        } else {
            signal
        };
        self.signal_raw(via_stage)
    }

    fn signal_raw(&self, signal: i32) -> bool {
        let stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        match stage.as_ref() {
            Some(fd) => pidfd::send_signal(fd.as_fd(), signal).is_ok(),
            None => false,
        }
    }

    /// Write `data` to its stdin (or terminal), waiting at most `timeout` for room.
    pub async fn input(&self, data: &[u8], timeout: Duration) -> Result<(), String> {
        let mut stdin = self.stdin.lock().await;
        let Some(sink) = stdin.as_mut() else {
            return Err(format!("process {} has no open stdin", self.id));
        };
        sink.write(data, timeout).await
    }

    /// Close its stdin (a terminal gets end-of-file, ^D, instead).
    pub async fn close_stdin(&self) -> Result<(), String> {
        let mut stdin = self.stdin.lock().await;
        match stdin.take() {
            Some(Stdin::Pipe(p)) => {
                drop(p);
                Ok(())
            }
            Some(mut t @ Stdin::Terminal(_)) => {
                let r = t.write(b"\x04", Duration::from_secs(1)).await;
                *stdin = Some(t);
                r
            }
            None => Err(format!("process {} has no open stdin", self.id)),
        }
    }

    /// Resize its terminal.
    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), String> {
        let Some(master) = &self.master else {
            return Err(format!("process {} has no terminal", self.id));
        };
        pty::set_size(master.get_ref().as_fd(), rows, cols).map_err(|e| e.to_string())
    }
}

/// The signal number of a wire name (`"SIGTERM"` or `"TERM"`).
#[must_use]
pub fn signal_number(name: &str) -> Option<i32> {
    let full = if name.starts_with("SIG") {
        name.to_owned()
    } else {
        format!("SIG{name}")
    };
    SIGNALS.iter().find(|(n, _)| *n == full).map(|(_, s)| *s)
}
