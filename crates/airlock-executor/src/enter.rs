//! Entering a sandbox, shared by a run's stage and a machine's init: taking the sandbox's
//! identity and joining its user and mount namespaces, and (in a pid namespace of one's own)
//! a fresh /proc, the sandbox's root, its hostname and loopback.
use std::os::fd::AsFd;
use std::path::Path;

use airlock_jail::{fdpass, identity, mounts, net, ns, process};

use crate::config::{HostId, ROOT_STAGING, SANDBOX_MNTNS_FD, SANDBOX_USERNS_FD};
use crate::container;
use crate::refusal::{Layer, Refusal};

/// A sandbox that outlives the run: its identity, then its user and mount namespaces.
pub(crate) fn join_sandbox(identity_id: Option<HostId>) -> Result<(), Refusal> {
    let userns = fdpass::take_inherited(SANDBOX_USERNS_FD).layer("sandbox")?;
    let mntns = fdpass::take_inherited(SANDBOX_MNTNS_FD).layer("sandbox")?;
    if let Some(id) = identity_id {
        identity::become_id(id).layer("identity")?;
    }
    // After the identity change, which clears the parent-death signal.
    process::set_parent_death_signal_kill().layer("pdeathsig")?;
    identity::join_user_namespace(userns.as_fd()).layer("userns")?;
    identity::join_mount_namespace(mntns.as_fd()).layer("mount namespace")
}

/// A fresh root of its own (no machine): /proc, the sandbox's root, hostname, loopback.
pub(crate) fn enter_own_root(hostname: &str) -> Result<(), Refusal> {
    let root = Path::new(ROOT_STAGING);
    mounts::mount_proc_at(&root.join("proc"))
        .map_err(container::explain(container::PROC_MOUNT))
        .layer("proc mount")?;
    mounts::pivot_into(root)
        .map_err(container::explain(container::PIVOT_ROOT))
        .layer("sandbox root")?;
    ns::set_hostname(hostname)
        .map_err(container::explain(container::SETHOSTNAME))
        .layer("uts namespace")?;
    net::loopback_up().layer("network namespace")
}
