//! The Landlock policy of a run: read-only what the workload needs to start, read-write the work
//! dir, nothing else. In particular nothing under /root, /home, /tmp or /var (other than an
//! interpreter prefix the user pointed at), and of /etc only the handful of files the dynamic
//! loader and libc read.
use std::path::{Path, PathBuf};

use airlock_executor::FsSpec;

use crate::interpreter::Interpreter;

/// System directories holding programs and shared libraries (public, not private data).
const SYSTEM_EXEC: [&str; 6] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/usr/lib64"];

/// Individual host files libc and common runtimes read; nothing here is private.
const SYSTEM_READ: [&str; 8] = [
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/ssl/certs",
    "/proc",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
];

fn paths(items: &[&str]) -> Vec<PathBuf> {
    items.iter().map(PathBuf::from).collect()
}

/// Policy for a Python run.
pub fn for_python(interp: &Interpreter, work_dir: &Path) -> FsSpec {
    let mut read_exec = paths(&SYSTEM_EXEC);
    read_exec.push(interp.executable.clone());
    read_exec.extend(interp.prefixes.iter().cloned());
    let mut read_only = paths(&SYSTEM_READ);
    read_only.extend(interp.path.iter().filter(|p| p.is_absolute()).cloned());
    FsSpec {
        read_only,
        read_exec,
        read_write: vec![work_dir.to_path_buf(), "/dev/null".into()],
    }
}

/// Policy for a command run.
pub fn for_command(program: &Path, work_dir: &Path) -> FsSpec {
    let mut read_exec = paths(&SYSTEM_EXEC);
    read_exec.push(program.to_path_buf());
    FsSpec {
        read_only: paths(&SYSTEM_READ),
        read_exec,
        read_write: vec![work_dir.to_path_buf(), "/dev/null".into()],
    }
}
