//! The broker's own look at a stopped branch before it lets it go on: everything a fresh
//! kernel's attestation would say, read from the host's `/proc` (nothing the branch says is
//! taken), plus what only a clone could have: threads, fds, shared mappings and a working
//! directory carried over from its kernel.
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;

use airlock_jail::procfs;

use crate::sandbox_fs::SandboxFs;

/// The namespaces a branch must hold of its own.
const NAMESPACES: [&str; 7] = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"];
/// Its fds: stdin (its kernel's), stdout, stderr and its socket; nothing else.
const FDS: [&str; 4] = ["0", "1", "2", "3"];
/// Bounded reads of the branch's `maps` (its lines are its own to multiply).
const MAPS_LIMIT: u64 = 4 << 20;

/// Why branch `pid` (a child of the kernel `kernel_pid` of sandbox `parent`) must not go on.
pub(super) fn check(pid: i32, kernel_pid: i32, parent: &SandboxFs) -> Result<(), String> {
    let mut wrong = Vec::new();
    status(pid, kernel_pid, &mut wrong);
    namespaces(pid, kernel_pid, &mut wrong);
    fds(pid, &mut wrong);
    mappings(pid, &mut wrong);
    working_dir(pid, parent, &mut wrong);
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("branch {pid} refused: {}", wrong.join("; ")))
    }
}

/// Why the kernel `pid` cannot be cloned as it is (its branches would be refused): it holds
/// an fd beyond its own four (an open file, say) or a shared writable mapping. The fork is
/// then made by a copy instead.
pub(super) fn clonable(pid: i32) -> Result<(), String> {
    let mut wrong = Vec::new();
    fds(pid, &mut wrong);
    mappings(pid, &mut wrong);
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the kernel holds what a clone would share: {}",
            wrong.join("; ")
        ))
    }
}

fn status(pid: i32, kernel_pid: i32, wrong: &mut Vec<String>) {
    let s = procfs::status_fields(pid);
    let is = |k: &str, v: &str| s.get(k).map(String::as_str) == Some(v);
    let kernel = kernel_pid.to_string();
    for (field, want) in [
        ("PPid", kernel.as_str()),
        ("Threads", "1"),
        ("NoNewPrivs", "1"),
        ("Seccomp", "2"),
    ] {
        if !is(field, want) {
            wrong.push(format!("{field} {:?}, not {want}", s.get(field)));
        }
    }
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let none = s.get(caps).and_then(|v| u64::from_str_radix(v, 16).ok()) == Some(0);
        if !none {
            wrong.push(format!("{caps} {:?}", s.get(caps)));
        }
    }
    if s.get("NSpid").and_then(|v| v.split_whitespace().last()) != Some("1") {
        wrong.push(format!("not pid 1 of its namespace: {:?}", s.get("NSpid")));
    }
}

fn namespaces(pid: i32, kernel_pid: i32, wrong: &mut Vec<String>) {
    for ns in NAMESPACES {
        let link = |p: i32| std::fs::read_link(format!("/proc/{p}/ns/{ns}")).ok();
        let (its, kernels) = (link(pid), link(kernel_pid));
        if its.is_none() || its == kernels {
            wrong.push(format!("its {ns} namespace is not its own"));
        }
    }
}

fn fds(pid: i32, wrong: &mut Vec<String>) {
    let held: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.take(1024)
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    let allowed: BTreeSet<String> = FDS.iter().map(|f| (*f).to_owned()).collect();
    if held != allowed {
        wrong.push(format!("it holds fds {held:?}, not {allowed:?}"));
    }
}

fn mappings(pid: i32, wrong: &mut Vec<String>) {
    use std::io::Read;
    let mut text = String::new();
    let read = std::fs::File::open(format!("/proc/{pid}/maps"))
        .and_then(|f| f.take(MAPS_LIMIT).read_to_string(&mut text));
    if read.is_err() {
        wrong.push("its mappings could not be read".into());
        return;
    }
    let shared_writable = text.lines().find(|l| {
        let perms = l.split_whitespace().nth(1).unwrap_or("");
        perms.as_bytes().get(1) == Some(&b'w') && perms.as_bytes().get(3) == Some(&b's')
    });
    if let Some(line) = shared_writable {
        wrong.push(format!("a shared writable mapping: {line}"));
    }
}

fn working_dir(pid: i32, parent: &SandboxFs, wrong: &mut Vec<String>) {
    let parents =
        airlock_jail::dirfd::fstat(std::os::fd::AsFd::as_fd(parent.data().as_ref())).map(|m| m.dev);
    let cwd = std::fs::metadata(format!("/proc/{pid}/cwd")).map(|m| m.dev());
    match (cwd, parents) {
        (Ok(c), Ok(p)) if c != p => {}
        _ => wrong.push("its working directory is on its parent's files".into()),
    }
}
