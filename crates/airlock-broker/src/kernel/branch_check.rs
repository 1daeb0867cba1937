//! The broker's own look at a stopped branch before it lets it go on: everything a fresh
//! kernel's attestation would say, read from the host's `/proc` (nothing the branch says is
//! taken), plus what only a clone could have: threads, fds, shared mappings and a working
//! directory carried over from its kernel. A branch's fds are checked by what they are, not
//! only by their numbers: fd 0 is `/dev/null`, 1, 2 and 3 the very pipes and socket the broker
//! made for it (a branch holding anything else at those numbers — its kernel's `/proc`, say,
//! or a sibling's channel — would keep a way to its parent and siblings).
use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use airlock_jail::procfs;

use super::door::BranchFds;

/// The namespaces a branch must hold of its own.
const NAMESPACES: [&str; 7] = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"];
/// Its fds: stdin (its kernel's), stdout, stderr and its socket; nothing else.
const FDS: [&str; 4] = ["0", "1", "2", "3"];
/// Bounded reads of the branch's `maps` (its lines are its own to multiply).
const MAPS_LIMIT: u64 = 4 << 20;

/// A file's identity: its device and inode.
type FileId = (u64, u64);

/// What a branch's fds 1, 2 and 3 must be: the stdout and stderr pipes and the socket the
/// broker made for it, by identity; and the broker's own handles on those very open files, to
/// see what the branch cannot show in `/proc`: whom they signal.
#[derive(Debug)]
pub(super) struct GivenFds {
    stdout: FileId,
    stderr: FileId,
    socket: FileId,
    files: BranchFds,
}

impl GivenFds {
    /// The identities of `fds` (in the door's order: socket, stdout, stderr), and handles on
    /// them.
    pub(super) fn of(fds: &BranchFds) -> std::io::Result<GivenFds> {
        let id = |i: usize| airlock_jail::dirfd::fstat(fds[i].as_fd()).map(|m| (m.dev, m.ino));
        Ok(GivenFds {
            socket: id(0)?,
            stdout: id(1)?,
            stderr: id(2)?,
            files: [
                fds[0].try_clone()?,
                fds[1].try_clone()?,
                fds[2].try_clone()?,
            ],
        })
    }
}

/// Why branch `pid` (a child of the kernel `kernel_pid`, given `given`) must not go on.
pub(super) fn check(pid: i32, kernel_pid: i32, given: &GivenFds) -> Result<(), String> {
    let mut wrong = Vec::new();
    status(pid, kernel_pid, &mut wrong);
    namespaces(pid, kernel_pid, &mut wrong);
    fds(pid, Some(given), &mut wrong);
    signal_owners(given, &mut wrong);
    mappings(pid, &mut wrong);
    working_dir(pid, &mut wrong);
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("branch {pid} refused: {}", wrong.join("; ")))
    }
}

/// Why the kernel `pid` cannot be cloned as it is (its branches would be refused): it holds
/// an fd beyond its own four (an open file, say), anything but `/dev/null` at fd 0, or a shared
/// writable mapping. The fork is then made by a copy instead.
pub(super) fn clonable(pid: i32) -> Result<(), String> {
    let mut wrong = Vec::new();
    fds(pid, None, &mut wrong);
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

/// Its fds are exactly 0 to 3, fd 0 is `/dev/null` and, for a branch, 1 to 3 are `given`.
fn fds(pid: i32, given: Option<&GivenFds>, wrong: &mut Vec<String>) {
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
    let at = |fd: u8| std::fs::metadata(format!("/proc/{pid}/fd/{fd}"));
    let null = std::fs::metadata("/dev/null").map(|m| m.rdev()).ok();
    let is_null = at(0).is_ok_and(|m| m.file_type().is_char_device() && Some(m.rdev()) == null);
    if !is_null {
        wrong.push("its fd 0 is not /dev/null".into());
    }
    let Some(given) = given else { return };
    for (fd, want) in [(1, given.stdout), (2, given.stderr), (3, given.socket)] {
        if at(fd).map(|m| (m.dev(), m.ino())).ok() != Some(want) {
            wrong.push(format!("its fd {fd} is not the one the broker gave it"));
        }
    }
}

/// None of the branch's socket and pipes signals anyone on `O_ASYNC`: an owner set on them
/// before the branch was stopped (by its kernel, between its clones) is a process outside the
/// branch's pid namespace — its frozen kernel, its parent, a sibling — that the branch could
/// signal at will (a `SIGCONT` resumes even a stopped pid-namespace init).
fn signal_owners(given: &GivenFds, wrong: &mut Vec<String>) {
    for (file, fd) in given.files.iter().zip([3, 1, 2]) {
        match airlock_jail::fd::signal_owner(file.as_fd()) {
            Ok(None) => {}
            Ok(Some(owner)) => wrong.push(format!("its fd {fd} has a signal owner ({owner})")),
            Err(e) => wrong.push(format!("its fd {fd}'s signal owner: {e}")),
        }
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

/// Its working directory is its root: not its parent's files, nor its kernel's `/proc` (which
/// the graft covers, and a working directory would keep).
fn working_dir(pid: i32, wrong: &mut Vec<String>) {
    let id =
        |link: &str| std::fs::metadata(format!("/proc/{pid}/{link}")).map(|m| (m.dev(), m.ino()));
    match (id("cwd"), id("root")) {
        (Ok(c), Ok(r)) if c == r => {}
        _ => wrong.push("its working directory is not its root".into()),
    }
}
