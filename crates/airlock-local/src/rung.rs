//! The rung the local backend declares, decided from a probe of this machine, never from
//! configuration, and the egress modes it can enforce.
//!
//! `container` is a process plus namespaces **and** cgroups, so it is declared only when the
//! user, net, pid and mount namespaces work (the same forked probes `airlock doctor` reports)
//! and the memory, pids and cpu cgroups and `cgroup.kill` are all usable. Anything less is an
//! honest `os_process`. It is never `hardened_container` or above: seccomp and Landlock narrow
//! a shared kernel, they do not interpose one.

use std::collections::BTreeSet;

use airlock_jail::cgroup;
use airlock_jail::doctor;
use airlock_policy::{Egress, Isolation};

/// The namespace layers `container` needs, as `doctor` names them.
const NAMESPACE_LAYERS: [&str; 4] = ["userns", "netns", "pidns", "mountns"];

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RungProbe {
    /// The rung to declare.
    pub isolation: Isolation,
    /// Every namespace layer works.
    pub namespaces: bool,
    /// Every cgroup limit (memory, pids, cpu, kill) is usable.
    pub cgroups: bool,
    /// Why, in one line (which layer is missing, if any).
    pub detail: String,
}

/// Probes this machine (forks short-lived children; call once, at construction).
#[must_use]
pub fn probe_rung() -> RungProbe {
    let layers = doctor::check_all();
    let missing_ns: Vec<&str> = NAMESPACE_LAYERS
        .iter()
        .copied()
        .filter(|name| !layers.iter().any(|l| l.layer == *name && l.available))
        .collect();
    let cg = cgroup::support();
    let mut missing_cg = Vec::new();
    for (ok, name) in [
        (cg.v1_memory, "memory"),
        (cg.v1_pids, "pids"),
        (cg.v1_cpu, "cpu"),
        (cg.v2_kill, "cgroup.kill"),
    ] {
        if !ok {
            missing_cg.push(name);
        }
    }
    decide(&missing_ns, &missing_cg)
}

/// The rung for a set of missing namespace layers and cgroup controllers.
#[must_use]
pub fn decide(missing_namespaces: &[&str], missing_cgroups: &[&str]) -> RungProbe {
    let namespaces = missing_namespaces.is_empty();
    let cgroups = missing_cgroups.is_empty();
    let isolation = if namespaces && cgroups {
        Isolation::Container
    } else {
        Isolation::OsProcess
    };
    let detail = if namespaces && cgroups {
        "namespaces and cgroup limits both hold".to_owned()
    } else {
        format!(
            "missing namespaces [{}], missing cgroup limits [{}]",
            missing_namespaces.join(", "),
            missing_cgroups.join(", ")
        )
    };
    RungProbe {
        isolation,
        namespaces,
        cgroups,
        detail,
    }
}

/// The egress modes the local backend enforces on this machine: `closed` (the executor's net
/// namespace has loopback only), and `allowlist` only where the broker-side proxy can be
/// enforced (`airlock_egress::availability`: Landlock TCP rules, ...).
#[must_use]
pub fn egress_modes() -> BTreeSet<Egress> {
    let mut modes = BTreeSet::from([Egress::Closed]);
    if airlock_egress::availability().is_ok() {
        modes.insert(Egress::Allowlist);
    }
    modes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_needs_both_halves() {
        assert_eq!(decide(&[], &[]).isolation, Isolation::Container);
        assert_eq!(decide(&["pidns"], &[]).isolation, Isolation::OsProcess);
        let p = decide(&[], &["cgroup.kill"]);
        assert_eq!(p.isolation, Isolation::OsProcess);
        assert!(p.detail.contains("cgroup.kill"));
    }
}
