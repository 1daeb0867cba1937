//! One cgroup per run: memory, pids and cpu limits under the cgroup v1 hierarchies where they
//! are writable, plus a child of the cgroup2 mount for `cgroup.kill`.
//!
//! Each run's cgroups are created as children of the broker's *own* cgroup in each hierarchy
//! (`/proc/self/cgroup`), which is what delegation hands a non-root user. A requested limit
//! that cannot be set is an error (never a silent degrade); hierarchies that are not needed for
//! a requested limit are used when available and skipped otherwise.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::sys::{read_bounded, write_file};
use crate::{JailError, Result};

/// Cgroup files are tiny; 64 KiB also bounds a `cgroup.procs` of ~8k pids.
const FILE_LIMIT: u64 = 64 * 1024;
/// `/proc/self/mountinfo` can be long on busy hosts.
const MOUNTINFO_LIMIT: u64 = 1024 * 1024;
const FIX: &str = "run the broker as root, or delegate a cgroup to its user: for v1 chown the \
                   broker's cgroup directories under /sys/fs/cgroup/{memory,pids,cpu} to that \
                   user; for cgroup2 start it with `systemd-run --user -p Delegate=yes`";

/// Limits for one run; `None` means "not limited" (the cgroup may still be used to account).
#[derive(Debug, Clone, Default)]
pub struct CgroupLimits {
    /// `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` when swap accounting exists).
    pub memory_bytes: Option<u64>,
    /// `pids.max`.
    pub pids: Option<u64>,
    /// CPU bandwidth in thousandths of a CPU (1000 = one full core), via CFS quota.
    pub cpu_millicores: Option<u64>,
}

/// What this machine lets the current user do with cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupSupport {
    /// A child of our v1 memory cgroup can be created.
    pub v1_memory: bool,
    /// A child of our v1 pids cgroup can be created.
    pub v1_pids: bool,
    /// A child of our v1 cpu cgroup can be created.
    pub v1_cpu: bool,
    /// A child of our cgroup2 cgroup can be created and has `cgroup.kill`.
    pub v2_kill: bool,
    /// Per-hierarchy findings, `; `-separated.
    pub detail: String,
    /// How to get what is missing, if anything is.
    pub fix: Option<String>,
}

/// The v1 controllers we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
    Cpu,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }
}

/// A hierarchy: where it is mounted, and our cgroup's path inside it.
#[derive(Debug, Clone)]
struct Hierarchy {
    mount: PathBuf,
    own: PathBuf,
}

impl Hierarchy {
    fn own_dir(&self) -> PathBuf {
        let rel = self.own.strip_prefix("/").unwrap_or(&self.own);
        self.mount.join(rel)
    }
}

/// `(v1 controller or None for cgroup2) -> hierarchy`, from mountinfo and /proc/self/cgroup.
fn find_hierarchy(controller: Option<Controller>) -> Option<Hierarchy> {
    let mountinfo = read_bounded(Path::new("/proc/self/mountinfo"), MOUNTINFO_LIMIT).ok()?;
    let cgroups = read_bounded(Path::new("/proc/self/cgroup"), FILE_LIMIT).ok()?;
    let mount = mountinfo.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        let mut post = post.split_whitespace();
        let fstype = post.next()?;
        let _source = post.next()?;
        let superopts = post.next().unwrap_or("");
        let mut pre = pre.split_whitespace();
        let root = pre.nth(3)?;
        let mountpoint = pre.next()?;
        let matches = match controller {
            None => fstype == "cgroup2",
            Some(c) => fstype == "cgroup" && superopts.split(',').any(|o| o == c.name()),
        };
        // A mount of a sub-tree (cgroup namespace or bind) would need path translation.
        (matches && root == "/").then(|| PathBuf::from(mountpoint))
    })?;
    let own = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let id = parts.next()?;
        let ctrls = parts.next()?;
        let path = parts.next()?;
        let matches = match controller {
            None => id == "0" && ctrls.is_empty(),
            Some(c) => ctrls.split(',').any(|x| x == c.name()),
        };
        matches.then(|| PathBuf::from(path))
    })?;
    Some(Hierarchy { mount, own })
}

fn cg_err(op: &'static str, path: &Path, source: io::Error) -> JailError {
    JailError::Cgroup {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn write_cg(dir: &Path, file: &str, value: &str, op: &'static str) -> Result<()> {
    let path = dir.join(file);
    write_file(&path, value.as_bytes()).map_err(|e| cg_err(op, &path, e))
}

fn read_u64(path: &Path) -> Option<u64> {
    read_bounded(path, FILE_LIMIT).ok()?.trim().parse().ok()
}

/// Tries to create (and remove) a probe child to learn whether we may create cgroups here.
fn probe(controller: Option<Controller>) -> std::result::Result<PathBuf, String> {
    let label = controller.map_or("cgroup2", Controller::name);
    let Some(h) = find_hierarchy(controller) else {
        return Err(format!("{label}: hierarchy not mounted"));
    };
    let parent = h.own_dir();
    let dir = parent.join(format!("airlock-probe-{}", std::process::id()));
    match std::fs::create_dir(&dir) {
        Ok(()) => {
            let kill_ok = controller.is_some() || dir.join("cgroup.kill").exists();
            let _ = std::fs::remove_dir(&dir);
            if kill_ok {
                Ok(parent)
            } else {
                Err(format!(
                    "{label}: {} has no cgroup.kill (kernel < 5.14)",
                    parent.display()
                ))
            }
        }
        Err(e) => Err(format!("{label}: mkdir under {}: {e}", parent.display())),
    }
}

/// Tries each hierarchy and says which are usable, why not, and how to fix it.
pub fn support() -> CgroupSupport {
    let mut details = Vec::new();
    let mut ok = |c: Option<Controller>| match probe(c) {
        Ok(p) => {
            details.push(format!(
                "{}: ok at {}",
                c.map_or("cgroup2", Controller::name),
                p.display()
            ));
            true
        }
        Err(e) => {
            details.push(e);
            false
        }
    };
    let v1_memory = ok(Some(Controller::Memory));
    let v1_pids = ok(Some(Controller::Pids));
    let v1_cpu = ok(Some(Controller::Cpu));
    let v2_kill = ok(None);
    let all = v1_memory && v1_pids && v1_cpu && v2_kill;
    CgroupSupport {
        v1_memory,
        v1_pids,
        v1_cpu,
        v2_kill,
        detail: details.join("; "),
        fix: (!all).then(|| FIX.to_string()),
    }
}

/// Our own cgroup's directory in each hierarchy a run uses — v1 memory, pids, cpu, then
/// cgroup2 — where it is mounted (the parents of every run cgroup this broker makes).
pub(crate) fn own_dirs() -> [Option<PathBuf>; 4] {
    let own = |c| find_hierarchy(c).map(|h| h.own_dir());
    [
        own(Some(Controller::Memory)),
        own(Some(Controller::Pids)),
        own(Some(Controller::Cpu)),
        own(None),
    ]
}

/// See [`RunCgroup::entry_handles`].
#[derive(Debug)]
pub struct EntryHandles {
    /// The `tasks` file of each v1 hierarchy, opened for writing.
    pub tasks: Vec<OwnedFd>,
    /// The cgroup2 directory, if the run has one.
    pub v2_dir: Option<OwnedFd>,
}

/// Move the calling thread into the cgroup whose `tasks` file `tasks` is, by writing `0`: for a
/// single-threaded process, the whole process, without the global migration lock.
pub fn enter_self(tasks: OwnedFd) -> Result<()> {
    use std::io::Write;
    std::fs::File::from(tasks)
        .write_all(b"0")
        .map_err(|e| JailError::io("write 0 to a cgroup's tasks", e))
}

/// One run's cgroups. Dropping it kills everything in them and removes them (best effort).
#[derive(Debug)]
pub struct RunCgroup {
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
    cpu: Option<PathBuf>,
    v2: Option<PathBuf>,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Creates `<own cgroup>/airlock-<run_name>` in a hierarchy. `Ok(None)` when not permitted.
fn make_dir(controller: Option<Controller>, run_name: &str) -> Result<Option<PathBuf>> {
    let Some(h) = find_hierarchy(controller) else {
        return Ok(None);
    };
    let dir = h.own_dir().join(format!("airlock-{run_name}"));
    match std::fs::create_dir(&dir) {
        Ok(()) => Ok(Some(dir)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(JailError::InvalidInput(
            format!("cgroup {} already exists", dir.display()),
        )),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOENT)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(cg_err("mkdir", &dir, e)),
    }
}

fn unsupported(what: &str) -> JailError {
    JailError::Unsupported {
        what: format!("a writable {what} cgroup"),
        fix: FIX.into(),
    }
}

impl RunCgroup {
    /// The run cgroups at `dirs` (as [`own_dirs`] orders them), made by another broker: owned
    /// from now on, so dropping them kills what is in them and removes them.
    pub(crate) fn adopt(dirs: [Option<PathBuf>; 4]) -> Self {
        let [memory, pids, cpu, v2] = dirs;
        RunCgroup {
            memory,
            pids,
            cpu,
            v2: v2.filter(|d| d.join("cgroup.kill").exists()),
        }
    }

    /// Creates the run's cgroups and sets `l`. Fails if a requested limit cannot be set, or if
    /// no hierarchy at all is writable.
    pub fn create(run_name: &str, l: &CgroupLimits) -> Result<Self> {
        if !valid_name(run_name) {
            return Err(JailError::InvalidInput(format!(
                "run name {run_name:?} must be 1-64 of [A-Za-z0-9_-]"
            )));
        }
        // Construct first so that Drop removes whatever was made if a later step fails.
        let mut cg = RunCgroup {
            memory: None,
            pids: None,
            cpu: None,
            v2: None,
        };
        cg.memory = make_dir(Some(Controller::Memory), run_name)?;
        cg.pids = make_dir(Some(Controller::Pids), run_name)?;
        cg.cpu = make_dir(Some(Controller::Cpu), run_name)?;
        cg.v2 = make_dir(None, run_name)?.filter(|d| d.join("cgroup.kill").exists());

        if let Some(bytes) = l.memory_bytes {
            let dir = cg.memory.as_deref().ok_or_else(|| unsupported("memory"))?;
            let v = bytes.to_string();
            write_cg(
                dir,
                "memory.limit_in_bytes",
                &v,
                "write memory.limit_in_bytes",
            )?;
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                write_cg(
                    dir,
                    "memory.memsw.limit_in_bytes",
                    &v,
                    "write memory.memsw.limit",
                )?;
            }
        }
        if let Some(n) = l.pids {
            let dir = cg.pids.as_deref().ok_or_else(|| unsupported("pids"))?;
            write_cg(dir, "pids.max", &n.to_string(), "write pids.max")?;
        }
        if let Some(m) = l.cpu_millicores {
            let dir = cg.cpu.as_deref().ok_or_else(|| unsupported("cpu"))?;
            // quota/period = millicores/1000; the kernel's minimum quota is 1000us.
            let period: u64 = 100_000;
            let quota = m.saturating_mul(period) / 1000;
            if quota < 1000 {
                return Err(JailError::InvalidInput(format!(
                    "cpu {m} millicores is below 10"
                )));
            }
            write_cg(
                dir,
                "cpu.cfs_period_us",
                &period.to_string(),
                "write cpu.cfs_period_us",
            )?;
            write_cg(
                dir,
                "cpu.cfs_quota_us",
                &quota.to_string(),
                "write cpu.cfs_quota_us",
            )?;
        }
        if cg.dirs().next().is_none() {
            return Err(unsupported("memory, pids, cpu or cgroup2"));
        }
        Ok(cg)
    }

    fn dirs(&self) -> impl Iterator<Item = &Path> {
        [&self.memory, &self.pids, &self.cpu, &self.v2]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }

    /// Moves `pid` into every one of the run's cgroups.
    pub fn add_process(&self, pid: i32) -> Result<()> {
        if pid <= 0 {
            return Err(JailError::InvalidInput(format!("bad pid {pid}")));
        }
        for dir in self.dirs() {
            write_cg(dir, "cgroup.procs", &pid.to_string(), "write cgroup.procs")?;
        }
        Ok(())
    }

    /// Whether the run has a `cgroup.kill` (exact, race-free kill of the whole tree).
    pub fn has_kill(&self) -> bool {
        self.v2.is_some()
    }

    /// Pids currently in the run's cgroups.
    pub fn pids(&self) -> Vec<i32> {
        let mut out: Vec<i32> = self
            .dirs()
            .filter_map(|d| read_bounded(&d.join("cgroup.procs"), FILE_LIMIT).ok())
            .flat_map(|t| {
                t.split_whitespace()
                    .filter_map(|s| s.parse().ok())
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// SIGKILLs everything in the run: `cgroup.kill` when there is one, then (or otherwise)
    /// repeated sweeps over `cgroup.procs` until it is empty (bounded; pids.max bounds forks).
    pub fn kill_all(&self) -> Result<()> {
        if let Some(dir) = &self.v2 {
            write_cg(dir, "cgroup.kill", "1", "write cgroup.kill")?;
        }
        for _ in 0..100 {
            let pids = self.pids();
            if pids.is_empty() {
                return Ok(());
            }
            for pid in pids {
                // SAFETY: kill only takes integers; the pid came from the run's own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err(JailError::InvalidInput(
            "processes survived kill_all".into(),
        ))
    }

    /// Whether the memory cgroup's OOM killer fired (`oom_kill` in `memory.oom_control`).
    pub fn oom_killed(&self) -> bool {
        let Some(dir) = &self.memory else {
            return false;
        };
        read_bounded(&dir.join("memory.oom_control"), FILE_LIMIT)
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse::<u64>().ok())
            })
            .is_some_and(|n| n > 0)
    }

    /// `memory.max_usage_in_bytes`.
    pub fn peak_memory_bytes(&self) -> Option<u64> {
        read_u64(&self.memory.as_ref()?.join("memory.max_usage_in_bytes"))
    }

    /// `memory.usage_in_bytes`.
    pub fn memory_bytes(&self) -> Option<u64> {
        read_u64(&self.memory.as_ref()?.join("memory.usage_in_bytes"))
    }

    /// Handles through which a process enters the run's cgroups by itself, without the
    /// kernel's global migration lock: each v1 hierarchy's `tasks` file, into which a
    /// single-threaded process writes `0` ([`enter_self`]; a write to `cgroup.procs`, or of any
    /// other pid, takes that lock and waits for an RCU grace period, milliseconds), and the
    /// cgroup2 directory, for `clone3(CLONE_INTO_CGROUP)` ([`crate::process::fork_as_sibling`]).
    /// The files are opened with this process's credentials, which the kernel checks.
    pub fn entry_handles(&self) -> Result<EntryHandles> {
        let mut tasks = Vec::new();
        for dir in [&self.memory, &self.pids, &self.cpu].into_iter().flatten() {
            let path = dir.join("tasks");
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| cg_err("open tasks", &path, e))?;
            tasks.push(OwnedFd::from(file));
        }
        let v2_dir = match &self.v2 {
            Some(dir) => Some(OwnedFd::from(
                std::fs::File::open(dir).map_err(|e| cg_err("open", dir, e))?,
            )),
            None => None,
        };
        Ok(EntryHandles { tasks, v2_dir })
    }

    /// Whether `pid` is in every one of the run's cgroups.
    pub fn holds(&self, pid: i32) -> bool {
        let wanted = pid.to_string();
        self.dirs().all(|d| {
            read_bounded(&d.join("cgroup.procs"), FILE_LIMIT)
                .map(|t| t.split_whitespace().any(|p| p == wanted))
                .unwrap_or(false)
        })
    }

    /// The run's cgroup directories (for diagnostics).
    pub fn paths(&self) -> Vec<PathBuf> {
        self.dirs().map(Path::to_path_buf).collect()
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        let _ = self.kill_all();
        for dir in self.dirs() {
            // A killed task can take a moment to leave; retry rmdir briefly.
            for _ in 0..50 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    Err(_) => break,
                }
            }
        }
    }
}
