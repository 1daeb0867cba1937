//! Landlock: a filesystem allowlist, no TCP (ABI >= 4; UDP too at ABI >= 10), and scoping of
//! abstract unix sockets and signals (ABI >= 6). Fails closed.
//!
//! The ruleset handles *every* access right the running kernel's ABI knows (as far as the
//! `landlock` crate knows them), so rights no path is granted (truncate, refer, ioctl on
//! devices, ...) are denied everywhere. Compatibility is `HardRequirement`: anything less than
//! full enforcement is [`JailError::LandlockNotEnforced`].

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::{JailError, Result};

/// Which paths the jailed process may use, and how. Paths may be files or directories; a
/// directory grants the access to everything beneath it.
#[derive(Debug, Clone, Default)]
pub struct FsPolicy {
    /// Read files and list directories.
    pub read_only: Vec<PathBuf>,
    /// Read, list and execute (interpreters, shared libraries).
    pub read_exec: Vec<PathBuf>,
    /// Every right: read, write, create, remove, truncate, ... (the run's work dir).
    pub read_write: Vec<PathBuf>,
    /// Files as data: read, list, write, create and remove files, directories, fifos and
    /// links, truncate, rename across directories; never execute, device ioctls or device and
    /// socket nodes. A forkable kernel gets it beneath its root (`/`): a branch's own `/work`
    /// and `/proc` are new mounts whose inodes no rule of the inherited domain could name, so
    /// which files it may write is its read-only mount layout's to say (docs/threat-model.md).
    pub data: Vec<PathBuf>,
}

/// What was enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI version.
    pub abi: u32,
    /// Policy paths that did not exist and so granted nothing.
    pub skipped: Vec<PathBuf>,
    /// Whether TCP bind/connect is denied (ABI >= 4).
    pub network_restricted: bool,
    /// Whether abstract unix sockets and signals are scoped to the sandbox (ABI >= 6).
    pub scoped: bool,
}

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The kernel's Landlock ABI version, or `None` when Landlock is not compiled in or not
/// enabled at boot.
pub fn abi_version() -> Option<u32> {
    // SAFETY: with a null attr, size 0 and the VERSION flag, the syscall reads no memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(r).ok().filter(|v| *v > 0)
}

fn not_enforced(e: impl std::fmt::Display) -> JailError {
    JailError::LandlockNotEnforced(e.to_string())
}

/// Restricts this process (and its future children) to `p`. Sets `no_new_privs` as Landlock
/// requires. Errors unless the whole policy is enforced.
pub fn restrict(p: &FsPolicy) -> Result<LandlockReport> {
    restrict_with_connect(p, &[])
}

/// [`restrict`], and TCP `connect` allowed to exactly `connect_ports` (any address; the
/// network namespace decides which addresses exist). A non-empty list needs ABI >= 4 and is
/// refused below it, never silently widened.
pub fn restrict_with_connect(p: &FsPolicy, connect_ports: &[u16]) -> Result<LandlockReport> {
    restrict_inner(p, Some(connect_ports), Scoping::Both)
}

/// [`restrict`] for a process of a sandbox's machine, whose network namespace holds only its
/// own loopback: TCP bind and connect are left to that namespace (any port of `lo`), the file
/// system and the scopes are restricted as everywhere.
pub fn restrict_on_own_loopback(p: &FsPolicy) -> Result<LandlockReport> {
    restrict_inner(p, None, Scoping::Both)
}

/// [`restrict_on_own_loopback`] for a background process of a sandbox's machine: signals are
/// not scoped to its own Landlock domain, so the machine's processes (each started with a
/// domain of its own) can signal one another as on any machine. What they can reach is the
/// machine's pid namespace: its own processes, never a host's or another sandbox's (nor its
/// init, which the kernel protects from signals sent inside its namespace). Abstract unix
/// sockets stay scoped.
pub fn restrict_in_machine(p: &FsPolicy) -> Result<LandlockReport> {
    restrict_inner(p, None, Scoping::AbstractSocketsOnly)
}

/// Which Landlock scopes (ABI >= 6) a ruleset takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scoping {
    Both,
    AbstractSocketsOnly,
}

/// `connect_ports`: `Some` handles TCP bind/connect (ABI >= 4) and allows connect to exactly
/// those ports; `None` leaves the network to the namespace.
fn restrict_inner(
    p: &FsPolicy,
    connect_ports: Option<&[u16]>,
    scoping: Scoping,
) -> Result<LandlockReport> {
    let Some(abi_num) = abi_version() else {
        return Err(JailError::Unsupported {
            what: "landlock".into(),
            fix: "boot a kernel >= 5.13 with CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= \
                  boot parameter (e.g. lsm=landlock,lockdown,yama,integrity,apparmor)"
                .into(),
        });
    };
    // The crate maps any ABI above the newest it knows to that newest one.
    let abi = ABI::from(i32::try_from(abi_num).unwrap_or(i32::MAX));
    let all_fs = AccessFs::from_all(abi);
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let read_exec = read | AccessFs::Execute;

    let mut ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all_fs)
        .map_err(not_enforced)?;
    let network_restricted = abi_num >= 4 && connect_ports.is_some();
    let connect_ports = connect_ports.unwrap_or(&[]);
    if network_restricted {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(not_enforced)?;
    }
    let scoped = abi_num >= 6;
    if scoped {
        let scopes = match scoping {
            Scoping::Both => Scope::AbstractUnixSocket | Scope::Signal,
            Scoping::AbstractSocketsOnly => Scope::AbstractUnixSocket.into(),
        };
        ruleset = ruleset.scope(scopes).map_err(not_enforced)?;
    }
    let mut created = ruleset.create().map_err(not_enforced)?;
    if !connect_ports.is_empty() && !network_restricted {
        return Err(JailError::Unsupported {
            what: "landlock TCP port rules".into(),
            fix: "allowlist egress needs Landlock ABI >= 4 (Linux 6.7+); use closed egress \
                  or upgrade the kernel"
                .into(),
        });
    }
    for port in connect_ports {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(not_enforced)?;
    }

    let mut skipped = Vec::new();
    let data = all_fs
        & !(AccessFs::Execute
            | AccessFs::IoctlDev
            | AccessFs::MakeChar
            | AccessFs::MakeBlock
            | AccessFs::MakeSock);
    let groups: [(&[PathBuf], BitFlags<AccessFs>); 4] = [
        (&p.read_only, read),
        (&p.read_exec, read_exec),
        (&p.read_write, all_fs),
        (&p.data, data),
    ];
    for (paths, access) in groups {
        for path in paths {
            match rule_for(path, access, abi)? {
                Some(rule) => {
                    created = created.add_rule(rule).map_err(not_enforced)?;
                }
                None => skipped.push(path.clone()),
            }
        }
    }
    let status = created.restrict_self().map_err(not_enforced)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => {}
        RulesetStatus::PartiallyEnforced | RulesetStatus::NotEnforced => {
            return Err(JailError::LandlockNotEnforced(format!(
                "ruleset status {:?} at abi {abi_num}",
                status.ruleset
            )))
        }
    }
    if !status.no_new_privs {
        return Err(JailError::LandlockNotEnforced(
            "no_new_privs not set".into(),
        ));
    }
    Ok(LandlockReport {
        abi: abi_num,
        skipped,
        network_restricted,
        scoped,
    })
}

/// A rule for `path`, with directory-only rights removed when it is not a directory.
/// `None` when the path does not exist.
fn rule_for(
    path: &Path,
    access: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<Option<PathBeneath<PathFd>>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(JailError::io("stat landlock path", e)),
    };
    let access = if meta.is_dir() {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    let fd = PathFd::new(path).map_err(not_enforced)?;
    Ok(Some(PathBeneath::new(fd, access)))
}
