//! What a sandbox's root holds, and the Landlock policy of a run inside it.
//!
//! The root ([`crate::sandbox_fs`]) holds only the system directories programs and shared
//! libraries live in, the handful of /etc files the dynamic loader and libc read, the
//! interpreter's own tree, and (for a one-shot command) the command — all read-only, nosuid,
//! nodev, at their host paths — plus its own /proc, /dev, and the bounded writable /work, /tmp
//! and /dev/shm. Nothing under /root, /home or /var is there unless an interpreter prefix the
//! user pointed at lives there. Landlock stays underneath as a second layer with the same lists.
use std::path::{Path, PathBuf};

use airlock_executor::config::GUEST_WORK_DIR;
use airlock_executor::FsSpec;

use crate::interpreter_facts::Interpreter;

/// System directories holding programs and shared libraries (public, not private data).
const SYSTEM_EXEC: [&str; 6] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/usr/lib64"];

/// Individual host files libc and common runtimes read; nothing here is private.
/// Only world-readable public data: `/etc/ssl` as a whole is not (its `private/` holds keys a
/// non-root broker's groups may read, and a non-root guest keeps those groups).
const SYSTEM_FILES: [&str; 7] = [
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/alternatives",
    // Debian's matplotlib reads its defaults only from here (a stateful sandbox's figures).
    "/etc/matplotlibrc",
];

/// What the guest reads beyond the binds (its own /proc and /dev, its /etc files).
const GUEST_READ: [&str; 6] = [
    "/proc",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
    "/dev/full",
    "/etc",
];

/// Where the guest may write (all on the sandbox's one bounded tmpfs, plus /dev/null).
const GUEST_WRITE: [&str; 4] = [GUEST_WORK_DIR, "/tmp", "/dev/shm", "/dev/null"];

/// The guest's `PATH` directories, searched (inside the sandbox's root) for a bare command.
pub const GUEST_PATH: [&str; 6] = [
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
    "/usr/local/sbin",
    "/usr/sbin",
    "/sbin",
];

fn paths(items: &[&str]) -> Vec<PathBuf> {
    items.iter().map(PathBuf::from).collect()
}

/// Host paths a sandbox's root binds: the system set, the interpreter's tree (if any) and
/// extra paths (a one-shot command).
pub fn root_binds(interp: Option<&Interpreter>, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut binds = paths(&SYSTEM_EXEC);
    binds.extend(paths(&SYSTEM_FILES));
    if let Some(i) = interp {
        binds.push(i.executable.clone());
        binds.extend(i.prefixes.iter().cloned());
        binds.extend(i.path.iter().filter(|p| p.is_absolute()).cloned());
    }
    binds.extend(extra.iter().cloned());
    binds
}

/// Landlock policy for a Python run.
pub fn for_python(interp: &Interpreter) -> FsSpec {
    let mut read_exec = paths(&SYSTEM_EXEC);
    read_exec.push(interp.executable.clone());
    read_exec.extend(interp.prefixes.iter().cloned());
    let mut read_only = paths(&GUEST_READ);
    read_only.extend(interp.path.iter().filter(|p| p.is_absolute()).cloned());
    FsSpec {
        read_only,
        read_exec,
        read_write: paths(&GUEST_WRITE),
        data: Vec::new(),
    }
}

/// Landlock policy for a command run (`program` is a guest path).
pub fn for_command(program: &Path) -> FsSpec {
    let mut read_exec = paths(&SYSTEM_EXEC);
    read_exec.push(program.to_path_buf());
    // Scripts and binaries the workload wrote may run (the mount is nosuid, the seccomp exec
    // profile still applies).
    read_exec.push(PathBuf::from(GUEST_WORK_DIR));
    FsSpec {
        read_only: paths(&GUEST_READ),
        read_exec,
        read_write: paths(&GUEST_WRITE),
        data: Vec::new(),
    }
}
