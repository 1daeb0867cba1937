//! The seccomp policy as reviewed data: one line per syscall, with the action and the reason.
//!
//! This is a deny-list layered on namespaces, Landlock, dropped capabilities and
//! `no_new_privs`; the allowlist-grade guarantees are the hard ABI checks in
//! [`super::compile`]: a foreign architecture (i386 via `int 0x80`) and any syscall number with
//! the x32 bit set kill the process before any rule is looked at.
//!
//! Decisions worth a reviewer's eye:
//! - `seccomp(2)` / `PR_SET_SECCOMP` stay allowed: filters only ever add restrictions, and the
//!   Run profile is installed by the guest itself after start-up.
//! - `clone3` is `ENOSYS` in *both* profiles (the brief allowed it in Exec): its flags live in
//!   memory a filter cannot read, while glibc falls back to `clone`, whose flags we can check.
//! - `clone` with any `CLONE_NEW*` flag is `EPERM` in both profiles (`unshare` is killed, and
//!   this is the same thing by another door). `CLONE_NEWTIME` (0x80) is not checkable through
//!   `clone` because it overlaps the exit-signal byte, and `clone` cannot request it anyway.
//! - `personality` is allowed only as a query (`0xffffffff`) or to set `PER_LINUX` (0), so
//!   `ADDR_NO_RANDOMIZE` / `READ_IMPLIES_EXEC` cannot weaken a later exec.
//! - memfd and SysV IPC are `ENOSYS` in both profiles ([`NO_UNBOUNDED_MEMORY`] says why).
//! - TCP Fast Open is `EPERM` in both profiles ([`NO_FAST_OPEN`] says why).
//! - native AIO, inotify/fanotify and setting xattrs are `ENOSYS` in both profiles
//!   ([`NO_SHARED_KERNEL_OBJECTS`] says why).
//! - `socketpair` is allowed for a connected `AF_UNIX` stream pair only (asyncio's event loop
//!   needs one as its self-pipe); `socket`, `bind`, `connect` (outside allowlist egress and
//!   loopback), `listen` and `accept` stay denied (outside loopback), so no path or abstract
//!   unix socket can be reached.
//! - [`Network::Loopback`] allows TCP servers: `socket` is still TCP only, so `bind`, `listen`
//!   and `accept` only ever see TCP sockets, a socketpair end (which, connected, cannot
//!   `listen`: `EINVAL`) or the inherited socket; the namespace has only `lo`, so nothing a
//!   listener accepts comes from outside the sandbox.
//! - calls that name a process — `prlimit64`, `setpriority`, `sched_setscheduler`,
//!   `sched_setparam`, `sched_setattr`, `ioprio_set` — are `EPERM` for any process but the
//!   caller, in every profile ([`Action::OwnProcessOnly`]): a sandbox's processes share one
//!   uid, and its machine's init must not be starved or have its limits lowered.
//! - `ioctl`: `TIOCSTI`, `TIOCLINUX`, `TIOCSETD` and `TIOCCONS` are `EPERM` in every profile
//!   ([`Action::DenyTtyInjection`]); `TIOCSCTTY` is not (the stage takes the sandbox's own
//!   terminal as controlling tty before the filter, and nothing else needs denying there).

use libc::c_long;

use super::profile::{Network, Profile};

/// `open_tree_attr(2)` (Linux 6.15); not in the `libc` crate yet. x86_64 table number.
const SYS_OPEN_TREE_ATTR: c_long = 467;

/// `setxattrat(2)` (Linux 6.13); not in the `libc` crate yet. x86_64 table number.
const SYS_SETXATTRAT: c_long = 463;

/// What to do with a matching syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `SECCOMP_RET_KILL_PROCESS`: the whole process dies with SIGSYS.
    Kill,
    /// `SECCOMP_RET_ERRNO`: the call fails with this errno, nothing else happens.
    Errno(i32),
    /// `clone`: allowed only with `CLONE_THREAD` and no `CLONE_NEW*` flag, else `EPERM`.
    CloneThreadsOnly,
    /// `clone`: allowed unless a `CLONE_NEW*` flag is set (then `EPERM`).
    CloneNoNamespaces,
    /// `clone` in a forkable kernel: threads as [`Action::CloneThreadsOnly`]; flags of
    /// exactly [`super::BRANCH_CLONE_FLAGS`] become a user notification, which the broker
    /// holding the filter's listener lets through only for a fork it asked for
    /// ([`super::notify`]); anything else `EPERM`.
    CloneThreadsOrBranch,
    /// `kill`: `EPERM` for a pid at or below 0 (a process group, or every process): a
    /// forkable kernel's branches stay in its process group, a `struct pid` that no pid
    /// namespace separates, so `kill(0, ..)` would reach the kernel and every sibling.
    PositivePidOnly,
    /// `ioctl`: `TIOCSTI` (push input into a tty), `TIOCLINUX` (console selection and
    /// paste), `TIOCSETD` (change a tty's line discipline: each one is kernel code with its own
    /// history of bugs, `n_hdlc` and `n_gsm` among them) and `TIOCCONS` (redirect the console's
    /// output to this tty; needs `CAP_SYS_ADMIN` anyway, denied as a second wall) fail
    /// with `EPERM`; every other request is allowed.
    DenyTtyInjection,
    /// `personality`: allowed for `0` and `0xffffffff`, anything else kills.
    PersonalityQueryOnly,
    /// `socket`: only TCP sockets (IPv4/IPv6 stream, protocol 0 or TCP), else `EPERM`. A
    /// client's and a listener's socket are the same call: what else they may do is decided
    /// by the `bind`/`listen`/`accept` rules of the network allowance.
    TcpClientSocket,
    /// `sendto`/`sendmsg`/`sendmmsg`: `EPERM` when argument `flags_arg` (the flags) carries
    /// `MSG_FASTOPEN`, every other send is allowed.
    NoFastOpenSend {
        /// The index of the flags argument (0-based).
        flags_arg: u32,
    },
    /// `setsockopt`: `EPERM` for the `IPPROTO_TCP` Fast Open options and the `SOL_SOCKET`
    /// buffer sizes (`SO_SNDBUF`, `SO_RCVBUF` and their `FORCE` twins), every other is allowed.
    NoFastOpenSockopt,
    /// `socketpair`: only a connected `AF_UNIX` `SOCK_STREAM` pair (protocol 0), else `EPERM`.
    /// It reaches nothing outside the process that made it: asyncio's self-pipe.
    UnixStreamPair,
    /// A call that names a process (its limits, its scheduling): allowed only for the caller
    /// itself — argument `pid_arg` is 0 and, where the call has one, argument `which.0` is
    /// `which.1` (the "a process" selector) — else `EPERM`. Every process of a sandbox runs as
    /// its one uid, so the kernel would let one lower another's limits or starve it (a
    /// machine's init among them).
    OwnProcessOnly {
        /// The index of the pid (or "who") argument.
        pid_arg: u32,
        /// The index of the selector argument and the value that means "a process".
        which: Option<(u32, u32)>,
    },
}

/// One line of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The x86_64 syscall number.
    pub nr: c_long,
    /// The syscall's name.
    pub name: &'static str,
    /// What happens.
    pub action: Action,
    /// Why (one line).
    pub reason: &'static str,
}

macro_rules! rule {
    ($sys:ident, $action:expr, $reason:literal) => {
        Rule {
            nr: libc::$sys,
            name: stringify!($sys),
            action: $action,
            reason: $reason,
        }
    };
}

use Action::{
    CloneNoNamespaces, CloneThreadsOnly, CloneThreadsOrBranch, DenyTtyInjection, Errno, Kill,
};

/// Rules in both profiles.
const COMMON: &[Rule] = &[
    rule!(
        SYS_ptrace,
        Kill,
        "reads/writes other processes' memory and registers"
    ),
    rule!(SYS_process_vm_readv, Kill, "reads another process's memory"),
    rule!(
        SYS_process_vm_writev,
        Kill,
        "writes another process's memory"
    ),
    rule!(
        SYS_pidfd_getfd,
        Kill,
        "steals an fd from another process (ptrace-class access)"
    ),
    rule!(
        SYS_mount,
        Kill,
        "changes the filesystem view (escape from the mount policy)"
    ),
    rule!(SYS_umount2, Kill, "uncovers what a mount hides"),
    rule!(
        SYS_pivot_root,
        Kill,
        "changes the root (escape from the mount policy)"
    ),
    rule!(
        SYS_chroot,
        Kill,
        "changes the root; the classic chroot-escape primitive"
    ),
    rule!(
        SYS_unshare,
        Kill,
        "new namespaces re-grant capabilities inside them"
    ),
    rule!(SYS_setns, Kill, "joins other namespaces"),
    rule!(SYS_bpf, Kill, "eBPF: a large kernel attack surface"),
    rule!(SYS_keyctl, Kill, "kernel keyrings are not namespaced"),
    rule!(SYS_add_key, Kill, "kernel keyrings are not namespaced"),
    rule!(SYS_request_key, Kill, "kernel keyrings are not namespaced"),
    rule!(
        SYS_perf_event_open,
        Kill,
        "perf: side channels and kernel attack surface"
    ),
    rule!(
        SYS_io_uring_setup,
        Kill,
        "io_uring bypasses seccomp for the ops it runs"
    ),
    rule!(
        SYS_io_uring_enter,
        Kill,
        "io_uring bypasses seccomp for the ops it runs"
    ),
    rule!(
        SYS_io_uring_register,
        Kill,
        "io_uring bypasses seccomp for the ops it runs"
    ),
    rule!(
        SYS_userfaultfd,
        Kill,
        "stalls kernel page faults: a race-exploit primitive"
    ),
    rule!(SYS_kexec_load, Kill, "replaces the running kernel"),
    rule!(SYS_kexec_file_load, Kill, "replaces the running kernel"),
    rule!(SYS_init_module, Kill, "loads kernel code"),
    rule!(SYS_finit_module, Kill, "loads kernel code"),
    rule!(SYS_delete_module, Kill, "unloads kernel code"),
    rule!(
        SYS_reboot,
        Kill,
        "reboots the machine (or the pid namespace)"
    ),
    rule!(SYS_swapon, Kill, "host memory configuration"),
    rule!(SYS_swapoff, Kill, "host memory configuration"),
    rule!(
        SYS_open_by_handle_at,
        Kill,
        "opens files by handle, bypassing path checks"
    ),
    rule!(
        SYS_name_to_handle_at,
        Kill,
        "pairs with open_by_handle_at; leaks inode handles"
    ),
    rule!(
        SYS_fsopen,
        Kill,
        "new mount API: creates a filesystem context"
    ),
    rule!(SYS_fsmount, Kill, "new mount API: creates a mount"),
    rule!(
        SYS_fsconfig,
        Kill,
        "new mount API: configures a filesystem context"
    ),
    rule!(
        SYS_fspick,
        Kill,
        "new mount API: reconfigures an existing mount"
    ),
    rule!(SYS_move_mount, Kill, "new mount API: attaches a mount"),
    rule!(SYS_open_tree, Kill, "new mount API: clones a mount tree"),
    Rule {
        nr: SYS_OPEN_TREE_ATTR,
        name: "SYS_open_tree_attr",
        action: Kill,
        reason: "new mount API: clones a mount tree with new attributes",
    },
    rule!(
        SYS_mount_setattr,
        Kill,
        "changes mount flags (e.g. drops nosuid/noexec)"
    ),
    rule!(SYS_acct, Kill, "process accounting is host configuration"),
    rule!(SYS_quotactl, Kill, "filesystem quota configuration"),
    rule!(SYS_lookup_dcookie, Kill, "kernel profiling interface"),
    rule!(SYS_iopl, Kill, "raw I/O port access"),
    rule!(SYS_ioperm, Kill, "raw I/O port access"),
    rule!(
        SYS_modify_ldt,
        Kill,
        "16-bit segments: historical kernel bugs, never needed"
    ),
    rule!(
        SYS_personality,
        Action::PersonalityQueryOnly,
        "execution domains can disable ASLR for a later exec"
    ),
    rule!(
        SYS_ioctl,
        DenyTtyInjection,
        "TIOCSTI/TIOCLINUX inject tty input; TIOCSETD reaches line-discipline code; TIOCCONS takes the console"
    ),
    rule!(
        SYS_prlimit64,
        Action::OwnProcessOnly { pid_arg: 0, which: None },
        "another process's limits: one process of a sandbox could cripple another (its init)"
    ),
    rule!(
        SYS_setpriority,
        Action::OwnProcessOnly { pid_arg: 1, which: Some((0, 0)) },
        "another process's (group's, user's) priority: PRIO_PROCESS of the caller only"
    ),
    rule!(
        SYS_sched_setscheduler,
        Action::OwnProcessOnly { pid_arg: 0, which: None },
        "another process's policy (SCHED_IDLE starves it): the caller only"
    ),
    rule!(
        SYS_sched_setparam,
        Action::OwnProcessOnly { pid_arg: 0, which: None },
        "another process's scheduling: the caller only"
    ),
    rule!(
        SYS_sched_setattr,
        Action::OwnProcessOnly { pid_arg: 0, which: None },
        "another process's scheduling: the caller only"
    ),
    rule!(
        SYS_ioprio_set,
        Action::OwnProcessOnly { pid_arg: 1, which: Some((0, 1)) },
        "another process's I/O priority: IOPRIO_WHO_PROCESS of the caller only"
    ),
];

/// Memory outside every bound, in both profiles: all `ENOSYS`, as on a kernel built without
/// them, so callers fall back to files (which land on the sandbox's size-bounded tmpfs:
/// `/work`, `/tmp`, `/dev/shm`, where POSIX shm lives too).
///
/// memfd pages live on the kernel's internal shm mount and SysV segments and message queues in
/// the IPC namespace: neither is on the sandbox's tmpfs, so without a memory cgroup (a non-root
/// broker) nothing but the RSS watchdog sees them, and an unmapped memfd or shm segment is not in
/// any RSS (measured: +1.5 GiB memfd and +2 GiB SysV shm of host `Shmem` under `--memory 128`).
///
/// Why not bound SysV IPC through the run's IPC namespace instead (`kernel.shmmax`, `shmall`,
/// `shmmni`, `msgmnb`, `msgmni`)? Those sysctls are writable only by uid 0 *of the user namespace
/// that owns the IPC namespace*; the guest's namespace maps a single id (1000), so its root is
/// unmapped, the files show as `nobody` and a write is `EACCES` (checked on 6.18 with
/// `unshare -U -i --map-user=1000`). Only host root outside could set them, which a non-root
/// broker -- the case with no cgroup -- is not; and they would still leave memfd unbounded.
/// Denying the calls holds for every broker and needs no writable sysctl.
const NO_UNBOUNDED_MEMORY: &[Rule] = &[
    rule!(
        SYS_memfd_create,
        Errno(libc::ENOSYS),
        "memory on the kernel's own shm mount, outside the disk bound"
    ),
    rule!(
        SYS_memfd_secret,
        Errno(libc::ENOSYS),
        "memory taken out of the kernel map; the same class, no use here"
    ),
    rule!(
        SYS_shmget,
        Errno(libc::ENOSYS),
        "SysV shm: outside the disk bound"
    ),
    rule!(
        SYS_shmat,
        Errno(libc::ENOSYS),
        "SysV shm: outside the disk bound"
    ),
    rule!(
        SYS_shmctl,
        Errno(libc::ENOSYS),
        "SysV shm: outside the disk bound"
    ),
    rule!(
        SYS_shmdt,
        Errno(libc::ENOSYS),
        "SysV shm: outside the disk bound"
    ),
    rule!(
        SYS_msgget,
        Errno(libc::ENOSYS),
        "SysV queues: unbounded kernel memory"
    ),
    rule!(
        SYS_msgsnd,
        Errno(libc::ENOSYS),
        "SysV queues: unbounded kernel memory"
    ),
    rule!(
        SYS_msgrcv,
        Errno(libc::ENOSYS),
        "SysV queues: unbounded kernel memory"
    ),
    rule!(
        SYS_msgctl,
        Errno(libc::ENOSYS),
        "SysV queues: unbounded kernel memory"
    ),
    rule!(
        SYS_semget,
        Errno(libc::ENOSYS),
        "SysV semaphores: kernel memory, no use"
    ),
    rule!(
        SYS_semop,
        Errno(libc::ENOSYS),
        "SysV semaphores: kernel memory, no use"
    ),
    rule!(
        SYS_semtimedop,
        Errno(libc::ENOSYS),
        "SysV semaphores: kernel memory, no use"
    ),
    rule!(
        SYS_semctl,
        Errno(libc::ENOSYS),
        "SysV semaphores: kernel memory, no use"
    ),
];

/// Kernel objects shared host-wide or outside both bounds, in both profiles, `ENOSYS` (callers
/// fall back, as on a kernel without them):
///
/// - native AIO: `io_setup` draws on the host-wide `fs.aio-max-nr`; a guest holding all of it
///   made every host process's `io_setup` fail (`EAGAIN`) for as long as it ran.
/// - inotify/fanotify: a watch on a bound system directory reports what the *host* opens there
///   (an activity leak across the boundary), and instances count against the invoking user's
///   `max_user_instances`, shared with the user's own programs.
/// - extended attributes: on the sandbox's tmpfs they are kernel memory counted in neither the
///   disk bound nor (without a cgroup) the memory limit (measured: 97 MiB of xattrs under
///   `--disk 1 --memory 64`); on the read-only binds they could never change anything anyway.
const NO_SHARED_KERNEL_OBJECTS: &[Rule] = &[
    rule!(SYS_io_setup, Errno(libc::ENOSYS), "host-wide AIO contexts"),
    rule!(SYS_io_submit, Errno(libc::ENOSYS), "native AIO"),
    rule!(SYS_io_getevents, Errno(libc::ENOSYS), "native AIO"),
    rule!(SYS_io_cancel, Errno(libc::ENOSYS), "native AIO"),
    rule!(SYS_io_destroy, Errno(libc::ENOSYS), "native AIO"),
    rule!(
        SYS_inotify_init,
        Errno(libc::ENOSYS),
        "host activity on bound dirs"
    ),
    rule!(
        SYS_inotify_init1,
        Errno(libc::ENOSYS),
        "host activity on bound dirs"
    ),
    rule!(
        SYS_fanotify_init,
        Errno(libc::ENOSYS),
        "host activity on bound dirs"
    ),
    rule!(
        SYS_setxattr,
        Errno(libc::ENOSYS),
        "xattrs: unbounded kernel memory"
    ),
    rule!(
        SYS_lsetxattr,
        Errno(libc::ENOSYS),
        "xattrs: unbounded kernel memory"
    ),
    rule!(
        SYS_fsetxattr,
        Errno(libc::ENOSYS),
        "xattrs: unbounded kernel memory"
    ),
    Rule {
        nr: SYS_SETXATTRAT,
        name: "SYS_setxattrat",
        action: Errno(libc::ENOSYS),
        reason: "xattrs: unbounded kernel memory",
    },
];

/// TCP Fast Open, in both profiles: `sendto(MSG_FASTOPEN)` (and `sendmsg`/`sendmmsg`) opens a
/// connection from inside `sendmsg` without `connect(2)`, so the Landlock TCP-connect rule
/// (only the egress proxy's port) never sees it. The flag is refused with `EPERM`, as are the
/// Fast Open socket options (`TCP_FASTOPEN`, `_CONNECT`, `_KEY`, `_NO_COOKIE`); every other
/// send and option is allowed (the tool channel, UDP on loopback in tests, Python's sockets).
const NO_FAST_OPEN: &[Rule] = &[
    rule!(
        SYS_sendto,
        Action::NoFastOpenSend { flags_arg: 3 },
        "MSG_FASTOPEN connects without connect(2)"
    ),
    rule!(
        SYS_sendmsg,
        Action::NoFastOpenSend { flags_arg: 2 },
        "MSG_FASTOPEN connects without connect(2)"
    ),
    rule!(
        SYS_sendmmsg,
        Action::NoFastOpenSend { flags_arg: 3 },
        "MSG_FASTOPEN connects without connect(2)"
    ),
    rule!(
        SYS_setsockopt,
        Action::NoFastOpenSockopt,
        "Fast Open options defer the connection to a send; larger socket buffers hold memory in no bound"
    ),
];

/// Rules only in the Run profile (Python: no process creation).
const RUN: &[Rule] = &[
    rule!(
        SYS_execve,
        Errno(libc::EPERM),
        "run mode executes no programs"
    ),
    rule!(
        SYS_execveat,
        Errno(libc::EPERM),
        "run mode executes no programs"
    ),
    rule!(
        SYS_fork,
        Errno(libc::EPERM),
        "run mode creates no processes"
    ),
    rule!(
        SYS_vfork,
        Errno(libc::EPERM),
        "run mode creates no processes"
    ),
    rule!(
        SYS_clone,
        CloneThreadsOnly,
        "threads are fine, new processes are not"
    ),
    rule!(
        SYS_clone3,
        Errno(libc::ENOSYS),
        "flags unreadable by BPF; glibc falls back to clone"
    ),
];

/// No new sockets, in both profiles: the only channel out is the inherited socket (and the
/// network namespace has nothing but `lo` anyway).
const NO_SOCKETS: &[Rule] = &[
    rule!(
        SYS_socket,
        Errno(libc::EPERM),
        "the only channel out is the inherited socket"
    ),
    rule!(
        SYS_socketpair,
        Action::UnixStreamPair,
        "a connected AF_UNIX pair reaches nothing (asyncio's self-pipe); nothing else"
    ),
    rule!(
        SYS_connect,
        Errno(libc::EPERM),
        "the only channel out is the inherited socket"
    ),
    rule!(SYS_bind, Errno(libc::EPERM), "no servers in run mode"),
    rule!(SYS_listen, Errno(libc::EPERM), "no servers in run mode"),
    rule!(SYS_accept, Errno(libc::EPERM), "no servers in run mode"),
    rule!(SYS_accept4, Errno(libc::EPERM), "no servers in run mode"),
];

/// Rules only in the Exec profile (commands may fork and exec).
const EXEC: &[Rule] = &[
    rule!(
        SYS_clone,
        CloneNoNamespaces,
        "processes and threads, but no new namespaces"
    ),
    rule!(
        SYS_clone3,
        Errno(libc::ENOSYS),
        "flags unreadable by BPF; glibc falls back to clone"
    ),
];

/// Allowlist egress: TCP clients only (the proxy is the one listener in the namespace, and
/// Landlock lets `connect` reach only its port); `connect` itself has no rule.
const PROXY_CLIENT: &[Rule] = &[
    rule!(
        SYS_socket,
        Action::TcpClientSocket,
        "TCP client sockets only, to reach the egress proxy"
    ),
    rule!(
        SYS_socketpair,
        Action::UnixStreamPair,
        "a connected AF_UNIX pair reaches nothing (asyncio's self-pipe); nothing else"
    ),
    rule!(SYS_bind, Errno(libc::EPERM), "no servers in the sandbox"),
    rule!(SYS_listen, Errno(libc::EPERM), "no servers in the sandbox"),
    rule!(SYS_accept, Errno(libc::EPERM), "no servers in the sandbox"),
    rule!(SYS_accept4, Errno(libc::EPERM), "no servers in the sandbox"),
];

/// A network namespace with only `lo`: TCP clients *and* servers on it (a guest's dev server,
/// reached through a port the broker forwards). The `socket` and `socketpair` checks are
/// [`PROXY_CLIENT`]'s; `bind`, `listen`, `accept`, `accept4`, `connect`, `getsockname`,
/// `getpeername`, `getsockopt` and `shutdown` have no rule, so they are allowed:
///
/// - `socket` makes nothing but TCP sockets, so a listener can only be TCP; the other sockets a
///   guest holds are a connected `socketpair` end or the inherited socket, which cannot
///   `listen` (`EINVAL`) and so cannot be reached by name even if bound to one.
/// - there is no interface but `lo`: `bind` takes only its addresses (or the wildcard, which
///   means the same here), `connect` reaches only listeners in the sandbox, and no packet from
///   outside reaches a listener (the broker forwards a port from outside, through the
///   namespace, not by a route into it).
/// - `setsockopt` keeps its [`NO_FAST_OPEN`] rule (no Fast Open, no buffer sizes), as does
///   every send.
const LOOPBACK: &[Rule] = &[
    rule!(
        SYS_socket,
        Action::TcpClientSocket,
        "TCP sockets only (clients and listeners on lo); no UDP, raw, unix, netlink or packet"
    ),
    rule!(
        SYS_socketpair,
        Action::UnixStreamPair,
        "a connected AF_UNIX pair reaches nothing (asyncio's self-pipe); nothing else"
    ),
];

/// The Run profile of a stateful kernel that may be forked copy-on-write: every rule of
/// [`rules_for`]`(Profile::Run, n)`, with `clone`'s rule [`Action::CloneThreadsOrBranch`],
/// and `kill` to a positive pid only ([`Action::PositivePidOnly`]).
pub fn rules_forkable(n: Network) -> Vec<Rule> {
    rules_for(Profile::Run, n)
        .into_iter()
        .map(|r| match r.nr {
            libc::SYS_clone => rule!(
                SYS_clone,
                CloneThreadsOrBranch,
                "threads; a branch's clone waits for the broker, which allows only forks it asked for"
            ),
            _ => r,
        })
        .chain(std::iter::once(rule!(
            SYS_kill,
            Action::PositivePidOnly,
            "no process-group signals: a branch shares its kernel's group across pid namespaces"
        )))
        .collect()
}

/// The full rule list of a profile, in filter order.
pub fn rules(p: Profile) -> Vec<Rule> {
    rules_for(p, Network::None)
}

/// The full rule list of a profile with a network allowance, in filter order.
pub fn rules_for(p: Profile, n: Network) -> Vec<Rule> {
    let extra = match p {
        Profile::Run => RUN,
        Profile::Exec => EXEC,
    };
    let net = match n {
        Network::None => NO_SOCKETS,
        Network::ProxyClient => PROXY_CLIENT,
        Network::Loopback => LOOPBACK,
    };
    COMMON
        .iter()
        .chain(NO_UNBOUNDED_MEMORY)
        .chain(NO_SHARED_KERNEL_OBJECTS)
        .chain(NO_FAST_OPEN)
        .chain(extra)
        .chain(net)
        .copied()
        .collect()
}
