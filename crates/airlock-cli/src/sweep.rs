//! What a server that was killed left behind, swept when `serve` or `mcp` starts: its runs'
//! cgroups (`airlock_jail::cgroup_sweep`). Its processes are gone already: every stage and
//! guest dies with its broker (parent-death signals), and the zygote with it.

/// Sweep, and say what was found.
pub fn at_start() {
    let sweep = airlock_jail::cgroup_sweep::sweep_orphans();
    if sweep.removed > 0 {
        tracing::info!(
            removed = sweep.removed,
            "removed the run cgroups of a server that is gone"
        );
    }
    if !sweep.left.is_empty() {
        tracing::warn!(left = ?sweep.left, "run cgroups of a server that is gone could not be removed");
    }
}
