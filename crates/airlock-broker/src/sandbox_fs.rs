//! A sandbox's own filesystem and identity, held by the broker for the sandbox's life.
//!
//! [`SandboxFs::create`] spawns a stage that assembles the sandbox's root
//! (`airlock_executor::assemble`) and hands back its user namespace, its mount namespace and
//! its work dir. Those three descriptors *are* the sandbox's filesystem: every run joins the
//! namespaces, the broker reads and writes files beneath the work dir handle with no-follow
//! primitives (never through a host path a guest could race), and dropping the `SandboxFs`
//! frees everything the sandbox wrote: nothing of it exists on the host's disk, whatever modes
//! the guest set, and a SIGKILLed broker's descriptors close with it.
//!
//! A root broker gives each sandbox an unprivileged host uid/gid that owns nothing
//! ([`sandbox_identity`]); the broker's own file operations switch to that identity's
//! filesystem ids ([`SandboxFs::as_owner`]), because the sandbox's filesystem maps only it.
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use airlock_executor::config::{ASSEMBLE_METHOD, SANDBOX_CHANNEL_FD};
use airlock_executor::{AssembleConfig, DataBounds, HostId};
use airlock_image::Image;
use airlock_jail::dirfd::{fstat, DirFd, FileKind};
use airlock_jail::mounts::Usage;
use airlock_jail::{fdpass, identity, mounts};
use airlock_protocol::Message;

use crate::machine::init::{Machine, MachineError, SandboxNamespaces};
use crate::refusal::read_refusal;
use crate::stage::{StageLaunch, StageOutput};

/// Host ids a root broker's sandboxes get: a range no account or file on a normal host uses.
const SANDBOX_ID_BASE: u32 = 2_000_000_000;
/// Width of that range (one id per sandbox, picked at random).
const SANDBOX_ID_SPAN: u32 = 1 << 24;
/// How long an assembling stage may take.
const ASSEMBLE_TIMEOUT: Duration = Duration::from_secs(20);

/// What the sandbox's root holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootSpec {
    /// Host paths bound read-only at the same path (none with an image).
    pub binds: Vec<PathBuf>,
    /// The kernel bound on everything the sandbox can write.
    pub data: DataBounds,
    /// The image whose root replaces the host's system directories, if any.
    pub image: Option<Arc<Image>>,
}

impl RootSpec {
    /// The root of an image: its own tree, nothing of the host's.
    #[must_use]
    pub fn of_image(image: Arc<Image>, data: DataBounds) -> RootSpec {
        RootSpec {
            binds: Vec::new(),
            data,
            image: Some(image),
        }
    }
}

/// Why a sandbox's filesystem could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SandboxFsError {
    /// The assembling stage could not be started or talked to.
    #[error("cannot start the sandbox's root assembly: {0}")]
    Spawn(#[from] std::io::Error),
    /// The assembling stage refused (a missing kernel feature, a bad path).
    #[error("{0}")]
    Refused(String),
}

/// One sandbox's filesystem: its namespaces and its work dir.
#[derive(Debug)]
pub struct SandboxFs {
    userns: OwnedFd,
    mntns: OwnedFd,
    work: Arc<DirFd>,
    /// The root of the writable tmpfs: `work`, `tmp`, `shm` (what a snapshot holds).
    data: Arc<DirFd>,
    owner: Option<HostId>,
    binds: Vec<PathBuf>,
    image: Option<(Arc<Image>, DirFd)>,
    /// The sandbox's machine, once started: every later run and process joins it.
    machine: std::sync::OnceLock<Arc<Machine>>,
    /// What its root was made of (a sandbox assembled on its own): a branch's root is made
    /// of the same.
    root: Option<RootSpec>,
}

/// The identity a new sandbox gets: a fresh unprivileged host id under a root broker, None
/// (the broker's own uid, the single-entry map) otherwise.
pub fn sandbox_identity() -> Option<HostId> {
    if !identity::effective_root() {
        return None;
    }
    let random = getrandom::u32().unwrap_or(std::process::id());
    let id = SANDBOX_ID_BASE + random % SANDBOX_ID_SPAN;
    Some(HostId { uid: id, gid: id })
}

impl SandboxFs {
    /// Assemble a sandbox root (blocking for a few milliseconds in a spawned stage).
    pub async fn create(executor: &Path, root: RootSpec) -> Result<SandboxFs, SandboxFsError> {
        let executor = executor.to_path_buf();
        tokio::task::spawn_blocking(move || create_blocking(&executor, root))
            .await
            .map_err(|e| SandboxFsError::Spawn(std::io::Error::other(e)))?
    }

    /// The filesystem of a forkable kernel's branch, the clone with host pid `pid` of this
    /// sandbox's kernel: a root made of what this one's was, as this sandbox's owner, in the
    /// branch's own user namespace, its writable tmpfs holding a copy of this sandbox's files
    /// and grafted into the branch (`airlock_executor::branch`).
    pub async fn create_branch(
        &self,
        executor: &Path,
        pid: i32,
    ) -> Result<SandboxFs, SandboxFsError> {
        let root = self.root.clone().ok_or_else(|| {
            SandboxFsError::Refused("this sandbox's root was not assembled on its own".into())
        })?;
        let (executor, owner) = (executor.to_path_buf(), self.owner);
        tokio::task::spawn_blocking(move || create_blocking_as(&executor, root, owner, Some(pid)))
            .await
            .map_err(|e| SandboxFsError::Spawn(std::io::Error::other(e)))?
    }

    /// The work dir (`/work` in the guest).
    #[must_use]
    pub fn work(&self) -> &Arc<DirFd> {
        &self.work
    }

    /// The root of the sandbox's writable tmpfs (`work`, `tmp`, `shm`): what a snapshot
    /// captures and a restore fills, as the owner ([`SandboxFs::as_owner_of`]).
    #[must_use]
    pub fn data(&self) -> &Arc<DirFd> {
        &self.data
    }

    /// The host identity the sandbox's files belong to (None: the broker's own).
    #[must_use]
    pub fn owner(&self) -> Option<HostId> {
        self.owner
    }

    /// Runs `f` on the work dir with the sandbox owner's filesystem ids (call it on a blocking
    /// thread: the ids are per thread and restored afterwards).
    pub fn as_owner<T>(&self, f: impl FnOnce(&DirFd) -> T) -> T {
        identity::with_fs_ids(self.owner, || f(&self.work))
    }

    /// The same, for a work dir handle cloned out of the sandbox (`Arc`), from a blocking task.
    pub fn as_owner_of<T>(owner: Option<HostId>, work: &DirFd, f: impl FnOnce(&DirFd) -> T) -> T {
        identity::with_fs_ids(owner, || f(work))
    }

    /// Bytes and inodes in use and in all.
    pub fn usage(&self) -> Option<Usage> {
        mounts::usage(self.work.as_fd()).ok()
    }

    /// The image the sandbox's root comes from, if any.
    #[must_use]
    pub fn image(&self) -> Option<&Arc<Image>> {
        self.image.as_ref().map(|(i, _)| i)
    }

    /// What the guest path `p` is in the image (resolved as the guest would, links followed
    /// inside the image only); None without an image or when it is not there.
    #[must_use]
    pub fn in_image(&self, p: &Path) -> Option<airlock_jail::dirfd::Meta> {
        let (_, root) = self.image.as_ref()?;
        let rel = p.strip_prefix("/").unwrap_or(p);
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".") // `/` itself
        } else {
            rel
        };
        let fd = root.open_path_in_root(rel.as_os_str()).ok()?;
        fstat(fd.as_fd()).ok()
    }

    /// True when the guest path `p` names the image's root itself (`/`, or a link to it): a
    /// path an image or its interpreter asks to have readable must not widen the policy to
    /// everything.
    #[must_use]
    pub fn is_image_root(&self, p: &Path) -> bool {
        let Some((_, root)) = self.image.as_ref() else {
            return false;
        };
        match (self.in_image(p), root.meta()) {
            (Some(a), Ok(b)) => a.dev == b.dev && a.ino == b.ino,
            _ => false,
        }
    }

    /// True when `p` (a guest path) is an executable file in the sandbox's root.
    #[must_use]
    pub fn has_executable(&self, p: &Path) -> bool {
        if self.image.is_some() {
            return self
                .in_image(p)
                .is_some_and(|m| m.kind == FileKind::Regular && m.mode & 0o111 != 0);
        }
        self.holds(p) && crate::interpreter::which(&p.to_string_lossy()).is_some()
    }

    /// True when the path `p` is visible in the sandbox's root: in its image, or (without one)
    /// under a bound host path.
    #[must_use]
    pub fn holds(&self, p: &Path) -> bool {
        if self.image.is_some() {
            return self.in_image(p).is_some();
        }
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        self.binds
            .iter()
            .any(|b| real.starts_with(b) || p.starts_with(b))
    }

    /// The sandbox a stage handed over (user namespace, mount namespace, data root).
    pub(crate) fn from_hand_over(
        [userns, mntns, data]: [OwnedFd; 3],
        owner: Option<HostId>,
        binds: Vec<PathBuf>,
        image: Option<(Arc<Image>, DirFd)>,
    ) -> std::io::Result<Self> {
        let data = DirFd::from_owned(data)?;
        let work = data.open_dir_at("work")?;
        Ok(SandboxFs {
            userns,
            mntns,
            work: Arc::new(work),
            data: Arc::new(data),
            owner,
            binds,
            image,
            machine: std::sync::OnceLock::new(),
            root: None,
        })
    }

    /// Copies of the namespace descriptors for one run's stage.
    pub(crate) fn namespaces(&self) -> std::io::Result<(OwnedFd, OwnedFd)> {
        Ok((self.userns.try_clone()?, self.mntns.try_clone()?))
    }

    /// The descriptors a stage of this sandbox joins, at their numbers: the user namespace,
    /// and the machine's namespaces if it has one (else the sandbox's mount namespace).
    pub(crate) fn join_fds(&self) -> std::io::Result<Vec<(OwnedFd, i32)>> {
        use airlock_executor::config::{SANDBOX_MNTNS_FD, SANDBOX_USERNS_FD};
        let mut fds = vec![(self.userns.try_clone()?, SANDBOX_USERNS_FD)];
        match self.machine.get() {
            Some(m) => fds.extend(m.namespaces()?),
            None => fds.push((self.mntns.try_clone()?, SANDBOX_MNTNS_FD)),
        }
        Ok(fds)
    }

    /// The sandbox's machine, if it was started.
    #[must_use]
    pub fn machine(&self) -> Option<&Arc<Machine>> {
        self.machine.get()
    }

    /// Start the sandbox's machine unless it runs already (see [`crate::machine`]); called on
    /// a runtime worker. Concurrent callers may both start one; the loser's is ended.
    pub async fn start_machine(
        &self,
        executor: &Path,
        limits: &crate::limits::Limits,
    ) -> Result<Arc<Machine>, MachineError> {
        if let Some(m) = self.machine.get() {
            return Ok(Arc::clone(m));
        }
        let (userns, mntns) = self.namespaces()?;
        let from = SandboxNamespaces {
            userns,
            mntns,
            owner: self.owner,
        };
        let started = Arc::new(Machine::start(executor, from, limits).await?);
        if !started.has_cgroup() {
            // No cgroup holds the machine's memory: its watchdog does.
            tokio::spawn(crate::machine::watchdog::watch(Arc::downgrade(&started)));
        }
        match self.machine.set(Arc::clone(&started)) {
            Ok(()) => Ok(started),
            Err(_) => {
                started.end().await;
                self.machine.get().cloned().ok_or(MachineError::Ended)
            }
        }
    }
}

fn create_blocking(executor: &Path, root: RootSpec) -> Result<SandboxFs, SandboxFsError> {
    create_blocking_as(executor, root, sandbox_identity(), None)
}

fn create_blocking_as(
    executor: &Path,
    root: RootSpec,
    owner: Option<HostId>,
    branch_of: Option<i32>,
) -> Result<SandboxFs, SandboxFsError> {
    let spec = root.clone();
    let image = match root.image {
        Some(i) => Some((Arc::clone(&i), DirFd::open(&i.root)?)),
        None => None,
    };
    let (ours, theirs) = UnixStream::pair()?;
    let (fd_ours, fd_theirs) = UnixStream::pair()?;
    let mut cmd = crate::stage::command(StageLaunch {
        executor,
        socket: OwnedFd::from(theirs),
        fds: vec![(fd_theirs.into(), SANDBOX_CHANNEL_FD)],
        output: StageOutput::Discarded,
        own_group: true,
    })?;
    let mut child = cmd.spawn()?;
    // The child holds the other ends now; ours must see EOF when it exits.
    drop(cmd);
    let binds = canonical(&root.binds);
    let config = AssembleConfig {
        identity: owner,
        binds: root.binds,
        data: root.data,
        image: image.as_ref().map(|(i, _)| i.root.clone()),
        branch_of,
    };
    let frame = Message::notification(ASSEMBLE_METHOD, serde_json::to_value(&config).ok());
    let outcome = airlock_protocol::write_message(&mut &ours, &frame)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|()| receive(&fd_ours));
    // The stage closes its hand-over socket when it fails, then writes why: read that first.
    let why = match &outcome {
        Ok(None) => Some(read_refusal(
            ours,
            "the sandbox root could not be assembled (the stage exited without a reason)",
        )),
        _ => None,
    };
    let _ = child.kill();
    let _ = child.wait();
    match outcome {
        Ok(Some(fds)) => Ok(SandboxFs {
            root: Some(spec),
            ..SandboxFs::from_hand_over(fds, owner, binds, image)?
        }),
        Ok(None) => Err(SandboxFsError::Refused(why.unwrap_or_default())),
        Err(e) => Err(SandboxFsError::Spawn(e)),
    }
}

/// The canonical forms of the bound paths that exist.
pub(crate) fn canonical(binds: &[PathBuf]) -> Vec<PathBuf> {
    binds
        .iter()
        .filter_map(|b| std::fs::canonicalize(b).ok())
        .collect()
}

/// The three descriptors, or None when the stage closed the channel before sending them.
fn receive(sock: &UnixStream) -> std::io::Result<Option<[OwnedFd; 3]>> {
    sock.set_read_timeout(Some(ASSEMBLE_TIMEOUT))?;
    receive_hand_over(sock)
}

/// The three descriptors of a hand-over, or None when the stage closed the channel first.
/// Blocking (within the socket's own read timeout).
pub(crate) fn receive_hand_over(sock: &UnixStream) -> std::io::Result<Option<[OwnedFd; 3]>> {
    let mut got = Vec::with_capacity(3);
    while got.len() < 3 {
        match fdpass::recv_fd(sock.as_fd()) {
            Ok(Some(fd)) => got.push(fd),
            Ok(None) => return Ok(None),
            // A socket with a read timeout is not restarted after a signal handler ran (the
            // runtime's SIGCHLD handler, for one).
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got.try_into().ok())
}
