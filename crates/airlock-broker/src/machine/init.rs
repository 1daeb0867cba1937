//! Starting a sandbox's machine and talking to its init (`airlock_executor::machine_init`):
//! the reaper pid 1 whose mount, network, pid, ipc and uts namespaces every later process of
//! the sandbox joins, and which dials ports of the sandbox's loopback for the broker.
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_executor::config::{
    InitConfig, INIT_METHOD, MACHINE_CHANNEL_FD, MACHINE_NAMESPACES, SANDBOX_MNTNS_FD,
    SANDBOX_USERNS_FD,
};
use airlock_executor::machine_init::{DIALED, DIAL_METHOD};
use airlock_jail::fdpass;
use airlock_protocol::Message;
use serde_json::json;

use crate::limits::Limits;
use crate::stage::{StageLaunch, StageOutput};
use crate::stage_cgroup;
use airlock_jail::cgroup::RunCgroup;

/// How long the init may take to hand its namespaces over.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the init's answer to a dial may take (it bounds its own connects at 1 s each).
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a dial waits for the machine's one dial lane before it is refused as busy.
const DIAL_QUEUE: Duration = Duration::from_secs(2);
/// How long the machine's end may take: pid 1 exits at EOF, the kernel empties its namespace.
const END_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a machine could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// The init could not be spawned or talked to.
    #[error("the sandbox's machine: {0}")]
    Io(#[from] io::Error),
    /// The init refused (a missing kernel feature, said how to fix).
    #[error("the sandbox's machine could not start: {0}")]
    Refused(String),
    /// Nothing accepted a connection on the port.
    #[error("nothing accepts connections on port {0} of the sandbox's loopback")]
    NotListening(u16),
    /// The machine has ended (its sandbox was disposed).
    #[error("the sandbox's machine has ended")]
    Ended,
    /// Another dial has held the machine's one dial lane for too long.
    #[error("the sandbox's ports are busy: another connection is still being made; retry")]
    Busy,
    /// The init once failed to answer a dial in time: its answers can no longer be matched to
    /// requests, so no port of this sandbox is dialled again.
    #[error("the sandbox's init stopped answering dials; dispose of the sandbox")]
    OutOfStep,
}

/// What a machine is started from: the sandbox's user and mount namespaces and its host
/// identity (see `SandboxFs::start_machine`).
#[derive(Debug)]
pub struct SandboxNamespaces {
    /// The sandbox's user namespace.
    pub userns: OwnedFd,
    /// The sandbox's mount namespace (its root staged).
    pub mntns: OwnedFd,
    /// The host identity the sandbox runs as (a root broker's sandboxes).
    pub owner: Option<airlock_executor::HostId>,
}

/// One sandbox's machine, held by its `SandboxFs` for the sandbox's life.
#[derive(Debug)]
pub struct Machine {
    /// The init's stage (the broker's child; killed when dropped).
    stage: tokio::sync::Mutex<Option<tokio::process::Child>>,
    /// Requests to the init (frames); closing it ends the machine.
    control: Mutex<Option<UnixStream>>,
    /// Descriptors from the init (tagged `SCM_RIGHTS` messages).
    fds: Mutex<UnixStream>,
    /// One dial at a time (each answer is the last request's): a dial waits for the lane at
    /// most `DIAL_QUEUE`, so a port that never accepts cannot pile dials (and blocking
    /// threads) up behind it.
    dial_lane: tokio::sync::Semaphore,
    /// Set when the init did not answer a dial in time (see [`MachineError::OutOfStep`]).
    out_of_step: std::sync::atomic::AtomicBool,
    /// mnt, net, pid, ipc, uts (the order of `MACHINE_NAMESPACES`).
    namespaces: Vec<OwnedFd>,
    /// `pid:[inode]` of the machine's pid namespace, as a process's attestation names it.
    pid_ns: String,
    /// The cgroup that holds the init and every background process (memory, pids and CPU
    /// bounded together), where the machine allows one; killed and removed when dropped.
    cgroup: Option<RunCgroup>,
    /// Without a cgroup: the memory every background process may hold together, and the
    /// stages of the processes started (their trees are what the watchdog measures).
    memory_bound: u64,
    stages: Mutex<Vec<i32>>,
    init_stage: i32,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Machine {
    /// Start the machine of the sandbox `fs` with the `airlock` binary `executor`. Called on a
    /// runtime worker (the init's stage dies with the thread that spawned it: a worker lives as
    /// long as the runtime).
    pub async fn start(
        executor: &Path,
        sandbox: SandboxNamespaces,
        limits: &Limits,
    ) -> Result<Machine, MachineError> {
        let (control, theirs) = UnixStream::pair()?;
        let (fds, fds_theirs) = UnixStream::pair()?;
        let SandboxNamespaces {
            userns,
            mntns,
            owner,
        } = sandbox;
        let mut cmd = crate::stage::async_command(StageLaunch {
            executor,
            socket: OwnedFd::from(theirs),
            fds: vec![
                (userns, SANDBOX_USERNS_FD),
                (mntns, SANDBOX_MNTNS_FD),
                (OwnedFd::from(fds_theirs), MACHINE_CHANNEL_FD),
            ],
            output: StageOutput::Discarded,
            own_group: true,
        })?;
        let stage = cmd.spawn()?;
        drop(cmd);
        let init_stage = stage.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        // Made and entered before the init reads its frame (so before it forks pid 1).
        let cgroup = stage_cgroup::create(limits).ok();
        if let Some(cg) = &cgroup {
            cg.add_process(init_stage)
                .map_err(|e| MachineError::Refused(format!("the machine's cgroup: {e}")))?;
        }
        let config = InitConfig {
            identity: owner,
            hostname: "airlock".into(),
        };
        let frame = Message::notification(INIT_METHOD, serde_json::to_value(&config).ok());
        airlock_protocol::write_message(&mut &control, &frame)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let (control, fds, got) = tokio::task::spawn_blocking(move || {
            let got = receive_namespaces(&fds);
            (control, fds, got)
        })
        .await
        .map_err(io::Error::other)?;
        let namespaces = match got {
            Ok(Some(ns)) => ns,
            Ok(None) => return Err(MachineError::Refused(refusal(control).await)),
            Err(e) => return Err(MachineError::Io(e)),
        };
        let pid_ns = namespace_name("pid", &namespaces[2])?;
        Ok(Machine {
            stage: tokio::sync::Mutex::new(Some(stage)),
            control: Mutex::new(Some(control)),
            fds: Mutex::new(fds),
            dial_lane: tokio::sync::Semaphore::new(1),
            out_of_step: std::sync::atomic::AtomicBool::new(false),
            namespaces,
            pid_ns,
            cgroup,
            memory_bound: limits.memory_bytes,
            stages: Mutex::new(Vec::new()),
            init_stage,
        })
    }

    /// What the watchdog measures: the init's stage and the bound; None once the machine ended.
    pub(crate) fn watched(&self) -> Option<(i32, u64)> {
        lock(&self.control)
            .is_some()
            .then_some((self.init_stage, self.memory_bound))
    }

    /// The stages of the background processes that are still alive.
    pub(crate) fn live_stages(&self) -> Vec<i32> {
        let mut stages = lock(&self.stages);
        stages.retain(|p| airlock_jail::procfs::process_exists(*p));
        stages.clone()
    }

    /// Put the stage `pid` of a background process in the machine's cgroup (before it forks
    /// the process); nothing where the machine has none.
    pub(crate) fn adopt(&self, pid: i32) -> Result<(), MachineError> {
        lock(&self.stages).push(pid);
        match &self.cgroup {
            Some(cg) => cg
                .add_process(pid)
                .map_err(|e| MachineError::Refused(format!("the machine's cgroup: {e}"))),
            None => Ok(()),
        }
    }

    /// The memory its cgroup charges now (the init and every background process), when it
    /// has one.
    #[must_use]
    pub fn memory_bytes(&self) -> Option<u64> {
        self.cgroup.as_ref()?.memory_bytes()
    }

    /// Whether the machine's processes are bounded together by a cgroup.
    #[must_use]
    pub fn has_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }

    /// Copies of the machine's namespaces at the numbers a joining stage takes them.
    pub fn namespaces(&self) -> io::Result<Vec<(OwnedFd, i32)>> {
        self.namespaces
            .iter()
            .zip(MACHINE_NAMESPACES)
            .map(|(fd, (_, target))| Ok((fd.try_clone()?, target)))
            .collect()
    }

    /// The machine's pid namespace as `/proc/<pid>/ns/pid` names it (`pid:[inode]`).
    #[must_use]
    pub fn pid_namespace(&self) -> &str {
        &self.pid_ns
    }

    /// A connection to `port` of the machine's loopback, made by its init and handed over.
    pub async fn dial(self: &Arc<Self>, port: u16) -> Result<tokio::net::TcpStream, MachineError> {
        let lane = tokio::time::timeout(DIAL_QUEUE, self.dial_lane.acquire())
            .await
            .map_err(|_| MachineError::Busy)?
            .map_err(|_| MachineError::Ended)?;
        if self.out_of_step.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(MachineError::OutOfStep);
        }
        let me = Arc::clone(self);
        let stream = tokio::task::spawn_blocking(move || me.dial_blocking(port))
            .await
            .map_err(io::Error::other)??;
        drop(lane);
        stream.set_nonblocking(true)?;
        Ok(tokio::net::TcpStream::from_std(stream)?)
    }

    fn dial_blocking(&self, port: u16) -> Result<std::net::TcpStream, MachineError> {
        // One request at a time: the answer on the descriptor socket is the last request's.
        let fds = lock(&self.fds);
        {
            let control = lock(&self.control);
            let Some(control) = control.as_ref() else {
                return Err(MachineError::Ended);
            };
            let frame = Message::notification(DIAL_METHOD, Some(json!({ "port": port })));
            airlock_protocol::write_message(&mut &*control, &frame)
                .map_err(|_| MachineError::Ended)?;
        }
        fds.set_read_timeout(Some(DIAL_TIMEOUT))?;
        loop {
            match fdpass::recv_tagged(fds.as_fd()) {
                Ok(Some((DIALED, Some(fd)))) => return Ok(std::net::TcpStream::from(fd)),
                Ok(Some(_)) => return Err(MachineError::NotListening(port)),
                Ok(None) => return Err(MachineError::Ended),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    // A late answer would be taken for the next request's.
                    self.out_of_step
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    return Err(MachineError::OutOfStep);
                }
                Err(e) => return Err(MachineError::Io(e)),
            }
        }
    }

    /// End the machine: its init sees EOF and exits, the kernel kills every process of its pid
    /// namespace, and the init's stage is reaped — all before this returns.
    pub async fn end(&self) {
        drop(lock(&self.control).take());
        let Some(mut stage) = self.stage.lock().await.take() else {
            return;
        };
        if tokio::time::timeout(END_TIMEOUT, stage.wait())
            .await
            .is_err()
        {
            let _ = stage.start_kill();
            let _ = stage.wait().await;
        }
    }
}

/// The namespace link name (`pid:[4026532...]`) of a namespace descriptor.
fn namespace_name(kind: &str, fd: &OwnedFd) -> io::Result<String> {
    let meta = std::fs::File::from(fd.try_clone()?).metadata()?;
    Ok(format!("{kind}:[{}]", meta.ino()))
}

/// The init's namespaces in order, or None when it closed the socket first (it refused).
fn receive_namespaces(sock: &UnixStream) -> io::Result<Option<Vec<OwnedFd>>> {
    sock.set_read_timeout(Some(START_TIMEOUT))?;
    let mut got = Vec::with_capacity(MACHINE_NAMESPACES.len());
    while got.len() < MACHINE_NAMESPACES.len() {
        match fdpass::recv_tagged(sock.as_fd()) {
            Ok(Some((tag, Some(fd)))) if usize::from(tag) == got.len() => got.push(fd),
            Ok(Some(_)) => return Err(io::Error::other("the init handed over out of order")),
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(got))
}

/// The init's `refused` message, read with a cap.
async fn refusal(sock: UnixStream) -> String {
    tokio::task::spawn_blocking(move || {
        crate::refusal::read_refusal(sock, "the init exited without a reason")
    })
    .await
    .unwrap_or_else(|e| e.to_string())
}
