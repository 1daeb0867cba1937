//! Which host processes are a kernel: the guest under a stage (a kernel the broker started),
//! or a branch of a forked kernel (a clone with no stage above it, whose parent is the frozen
//! kernel it was cloned from).
use airlock_jail::procfs;

/// A kernel's processes, as the broker finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Procs {
    /// Everything under this stage (its guest, pid 1 of the run, and anything under that).
    Stage(i32),
    /// This branch process and anything under it.
    Branch(i32),
}

impl Procs {
    /// The kernel's processes now.
    pub(crate) fn pids(self) -> Vec<i32> {
        match self {
            Procs::Stage(stage) => procfs::descendants(stage),
            Procs::Branch(pid) => std::iter::once(pid)
                .filter(|p| procfs::process_exists(*p))
                .chain(procfs::descendants(pid))
                .collect(),
        }
    }

    /// Their summed RSS (shared pages once per process: over, the safe direction).
    pub(crate) fn rss(self) -> u64 {
        match self {
            Procs::Stage(pid) | Procs::Branch(pid) => procfs::tree_rss_bytes(pid),
        }
    }
}
