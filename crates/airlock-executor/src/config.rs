//! What the broker tells the stage, in the first frame on the socket.
use std::path::PathBuf;

pub use airlock_jail::identity::HostId;
use serde::{Deserialize, Serialize};

/// The method name of the first frame (a notification) carrying an [`ExecutorConfig`].
pub const SETUP_METHOD: &str = "setup";

/// The method name of the first frame (a notification) carrying an [`AssembleConfig`]: build a
/// sandbox's root and hand its namespaces back, run nothing.
pub const ASSEMBLE_METHOD: &str = "assemble";

/// The stage's fd of the socket over which an assembling stage (or a one-shot run's stage,
/// which builds its root itself) hands back, in order, the sandbox's user namespace, its mount
/// namespace and its work dir (one `SCM_RIGHTS` message each).
pub const SANDBOX_CHANNEL_FD: i32 = 6;
/// In a run, the stage's fd of the sandbox's user namespace (joined first).
pub const SANDBOX_USERNS_FD: i32 = 6;
/// In a run, the stage's fd of the sandbox's mount namespace (joined second).
pub const SANDBOX_MNTNS_FD: i32 = 7;

/// The method name of the first frame (a notification) carrying an [`InitConfig`]: start the
/// sandbox's machine, the reaper pid 1 whose namespaces every later process of the sandbox
/// joins.
pub const INIT_METHOD: &str = "init";

/// The frame that opens a stage sealing a forkable kernel before its fork.
pub const SEAL_METHOD: &str = "seal";

/// What a sealing stage is told: make the writable mounts of the kernel `kernel_pid` (its
/// `/work`, `/tmp`, `/dev/shm`) read-only in the kernel's own mount namespace, so that its
/// branches are born with them read-only and locked (no branch can write what another reads
/// before each gets its own).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SealConfig {
    /// The sandbox's host identity (a root broker's sandboxes): who owns its user namespace.
    #[serde(default)]
    pub identity: Option<HostId>,
    /// The kernel's host pid.
    pub kernel_pid: i32,
}

/// In a run or process of a sandbox with a machine, the stage's fds of the machine's network,
/// pid, ipc and uts namespaces (its mount namespace is on [`SANDBOX_MNTNS_FD`]).
pub const MACHINE_NET_FD: i32 = 8;
/// See [`MACHINE_NET_FD`].
pub const MACHINE_PID_FD: i32 = 9;
/// See [`MACHINE_NET_FD`].
pub const MACHINE_IPC_FD: i32 = 10;
/// See [`MACHINE_NET_FD`].
pub const MACHINE_UTS_FD: i32 = 11;
/// In a machine's init, the socket over which it hands the broker its namespaces and,
/// later, each connection it dials (tagged `SCM_RIGHTS` messages; requests come as frames on
/// stdin).
pub const MACHINE_CHANNEL_FD: i32 = 13;
/// In a stage restoring a paused kernel, the image ([`crate::kernel_image`]), read from its
/// start.
pub const KERNEL_IMAGE_FD: i32 = 14;
/// In a background process's stage, its stdin: the read end of a pipe or a terminal's slave.
pub const PROCESS_STDIO_FD: i32 = 12;
/// The namespaces of a machine, in the order its init hands them over (one `SCM_RIGHTS`
/// message each, tagged with its index) and the fd each has in a joining stage.
pub const MACHINE_NAMESPACES: [(&str, i32); 5] = [
    ("mnt", SANDBOX_MNTNS_FD),
    ("net", MACHINE_NET_FD),
    ("pid", MACHINE_PID_FD),
    ("ipc", MACHINE_IPC_FD),
    ("uts", MACHINE_UTS_FD),
];

/// What a machine's init is told.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InitConfig {
    /// The sandbox's host identity (a root broker's sandboxes).
    #[serde(default)]
    pub identity: Option<HostId>,
    /// Hostname inside the machine's uts namespace.
    pub hostname: String,
}

/// How a stage of a sandbox with a machine joins it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Joining {
    /// A run: the machine's namespaces, then a pid namespace of its own nested in the
    /// machine's (pid 1 of it, torn down like any run).
    Run,
    /// A background process: a process of the machine's pid namespace itself, leader of its
    /// own session, with its stdio as given.
    Process {
        /// What its stdin (and, for a terminal, stdout and stderr) is.
        stdio: ProcessStdio,
    },
}

/// A background process's stdio.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProcessStdio {
    /// stdin is /dev/null; stdout and stderr are the stage's.
    Null,
    /// stdin is the pipe on [`PROCESS_STDIO_FD`]; stdout and stderr are the stage's.
    Pipe,
    /// stdin, stdout and stderr are the terminal on [`PROCESS_STDIO_FD`], the controlling
    /// terminal of the process's session.
    Terminal,
}

/// Where the sandbox's root is assembled inside its mount namespace (a tmpfs mounted over this
/// directory, never visible on the host); a run pivots into it.
pub const ROOT_STAGING: &str = "/tmp";
/// The guest path of the work dir, the same for every sandbox.
pub const GUEST_WORK_DIR: &str = "/work";
/// The uid/gid the guest has inside its user namespace: not 0, so execve drops every capability.
pub const INSIDE_ID: u32 = 1000;

/// What an assembling stage builds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AssembleConfig {
    /// The host identity to become first (a root broker's sandboxes); None keeps the caller's.
    #[serde(default)]
    pub identity: Option<HostId>,
    /// Host paths bound read-only, nosuid, nodev at the same path in the root (files or
    /// directories; a symlink is reproduced and its target bound).
    pub binds: Vec<PathBuf>,
    /// The bound on everything the sandbox can write (/work, /tmp, /dev/shm together).
    pub data: DataBounds,
    /// An image's unpacked root (a host directory of the image store): its top-level entries
    /// are bound instead of any host path (`binds` must then be empty).
    #[serde(default)]
    pub image: Option<PathBuf>,
    /// The host pid of a forkable kernel's branch to make this root for: its user namespace
    /// is joined (and mapped) instead of a fresh one made, and the root's writable tmpfs is
    /// grafted into it (`crate::branch`).
    #[serde(default)]
    pub branch_of: Option<i32>,
}

/// Kernel bounds on a sandbox's writable filesystem.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct DataBounds {
    /// Bytes.
    pub bytes: u64,
    /// Files, directories and links.
    pub inodes: u64,
}

/// In allowlist egress, the stage's fd (mapped by the broker at spawn) of the socket over
/// which pid 1 hands the proxy listener to the broker.
pub const EGRESS_CHANNEL_FD: i32 = 5;

/// Everything the stage needs to isolate itself and start the guest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutorConfig {
    /// What to run once isolated.
    pub mode: Mode,
    /// The guest's working directory (a guest path: /work or beneath it).
    pub cwd: PathBuf,
    /// The host identity to become before joining the sandbox (a root broker's sandboxes).
    #[serde(default)]
    pub identity: Option<HostId>,
    /// The complete environment of the guest; nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// Kernel-enforced backstops.
    pub rlimits: RlimitSpec,
    /// Landlock file-system policy.
    pub fs: FsSpec,
    /// Hostname inside the uts namespace.
    pub hostname: String,
    /// Allowlist egress: pid 1 listens on `127.0.0.1:<port>` inside the sandbox's network
    /// namespace, hands the listener to the broker over [`EGRESS_CHANNEL_FD`], and the guest
    /// may open TCP client sockets and connect to that port only. `None`: no network at all.
    #[serde(default)]
    pub egress_proxy_port: Option<u16>,
    /// The interpreter is not the host's (it comes from an image): the stage installs the exec
    /// seccomp filter before it starts, so the run filter its bootstrap adds is never the only
    /// one a hostile interpreter could have skipped.
    #[serde(default)]
    pub untrusted_interpreter: bool,
    /// A one-shot run: build the sandbox's root in this very stage (its own user and mount
    /// namespace, handed back over [`SANDBOX_CHANNEL_FD`]) instead of joining a sandbox's
    /// namespaces on [`SANDBOX_USERNS_FD`] and [`SANDBOX_MNTNS_FD`]. Its identity is the run's.
    #[serde(default)]
    pub root: Option<AssembleConfig>,
    /// The sandbox has a machine (its namespaces on [`SANDBOX_USERNS_FD`], [`SANDBOX_MNTNS_FD`]
    /// and the `MACHINE_*` fds): join it this way. Its network namespace is the machine's
    /// loopback, where the guest may listen and connect.
    #[serde(default)]
    pub machine: Option<Joining>,
    /// A stateful kernel that may be forked copy-on-write: its Run filter asks the broker
    /// about a branch clone (`seccomp::compile_forkable`), and the guest installs it with a
    /// listener the broker takes.
    #[serde(default)]
    pub forkable: bool,
    /// A stateful kernel restored from a paused one's image (on [`KERNEL_IMAGE_FD`]) instead
    /// of a fresh interpreter: once every layer is in force (the Run filter installed by the
    /// stage, as for a command) and the broker has answered `ready` with `start`, the stage
    /// becomes the image and says `restored`.
    #[serde(default)]
    pub restore_image: bool,
}

/// The two workloads a stage can start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mode {
    /// CPython with the guest bootstrap; the program arrives later in an `execute` request.
    Python {
        /// Absolute path of the real interpreter binary.
        interpreter: PathBuf,
        /// The guest bootstrap compiled by that interpreter (`marshal`, hex); the source is run
        /// instead when absent.
        #[serde(default)]
        bootstrap: Option<String>,
    },
    /// A command, started after the broker answers `ready` with `start`.
    Command {
        /// Absolute path of the program to execve.
        program: PathBuf,
        /// argv, including argv[0].
        argv: Vec<String>,
    },
}

/// rlimits applied before the guest starts (`RLIMIT_CORE` is always 0).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RlimitSpec {
    /// `RLIMIT_AS` in bytes: a backstop under the broker's RSS watchdog.
    pub address_space: Option<u64>,
    /// `RLIMIT_FSIZE` in bytes.
    pub file_size: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC`, counted inside the run's own user namespace.
    pub processes: Option<u64>,
}

/// Landlock rules: everything not listed is denied.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FsSpec {
    /// Readable, not executable.
    pub read_only: Vec<PathBuf>,
    /// Readable and executable (interpreter, shared libraries, commands).
    pub read_exec: Vec<PathBuf>,
    /// Readable and writable (the work dir).
    pub read_write: Vec<PathBuf>,
    /// Files as data beneath these (a forkable kernel's root): `landlock::FsPolicy::data`.
    #[serde(default)]
    pub data: Vec<PathBuf>,
}
