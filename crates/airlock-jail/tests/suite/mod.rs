//! Shared helpers: run the probe (as root and as an unprivileged uid), read its verdict.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

mod cgroup;
mod doctor;
mod landlock;
mod namespaces;
mod nproc;
mod procfs;
mod seccomp;

/// A uid no other process uses, for the non-root runs.
pub const NONROOT_UID: u32 = 64_999;

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn probe_cmd(nonroot: bool, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock-jail-probe"));
    if nonroot && is_root() {
        cmd.args(["--as-uid", &NONROOT_UID.to_string()]);
    }
    cmd.args(args);
    cmd
}

/// Runs the probe, returning its output; prints it for the test log.
pub fn probe(nonroot: bool, args: &[&str]) -> Output {
    let out = probe_cmd(nonroot, args).output().expect("spawn probe");
    println!("probe {args:?} (nonroot={nonroot}) -> {:?}", out.status);
    println!("{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Both identities the tests run under: the current one, and an unprivileged one.
pub const BOTH: [bool; 2] = [false, true];

pub fn assert_passed(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

pub fn assert_killed_by(out: &Output, sig: i32) {
    assert_eq!(
        out.status.signal(),
        Some(sig),
        "expected death by signal {sig}: {:?}",
        out.status
    );
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A temp dir anyone can write to (the non-root probe builds its tree in it).
pub fn open_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    d
}
