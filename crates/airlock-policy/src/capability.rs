//! What a backend can do and a workload cannot run without.

use std::collections::BTreeSet;

use crate::vocab::vocabulary;

/// One thing a sandbox can do. A backend declares the set it serves; a spec states the set its
/// workload requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// Run a command (`Sandbox::exec`).
    Exec,
    /// Evaluate a program (`Sandbox::run_code`).
    RunCode,
    /// Call host-side tools from inside the guest: trust crosses outward.
    HostTools,
    /// Write files into the guest (`Sandbox::write_file`).
    FilesIn,
    /// Pull declared files out of the guest (`Sandbox::stat`, `Sandbox::read_file`).
    FilesOut,
    /// Enumerate a guest directory (`Sandbox::list`).
    FilesList,
    /// Delete a guest file (`Sandbox::remove`).
    FilesDelete,
    /// Snapshot and restore a sandbox.
    Snapshot,
    /// Attach an identity (an authority) to the sandbox.
    AttachedIdentity,
    /// Start background processes (and terminals) that outlive a call.
    Processes,
    /// Reach a port on the sandbox's own loopback from the host (`sandbox.expose`): never in
    /// a default, a spec must ask for it.
    Ports,
}

vocabulary!(Capability, "capability", {
    Exec => "exec",
    RunCode => "run_code",
    HostTools => "host_tools",
    FilesIn => "files_in",
    FilesOut => "files_out",
    FilesList => "files_list",
    FilesDelete => "files_delete",
    Snapshot => "snapshot",
    AttachedIdentity => "attached_identity",
    Processes => "processes",
    Ports => "ports",
});

/// What a backend that states no capabilities is read as declaring: exec and files-in, which
/// the `Sandbox` trait obliges every backend to serve.
#[must_use]
pub fn default_capabilities() -> BTreeSet<Capability> {
    BTreeSet::from([Capability::Exec, Capability::FilesIn])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eleven_capabilities_round_trip() {
        assert_eq!(Capability::ALL.len(), 11);
        for c in Capability::ALL {
            assert_eq!(c.as_str().parse::<Capability>(), Ok(*c));
        }
        assert!("network".parse::<Capability>().is_err());
        assert!("EXEC".parse::<Capability>().is_err());
    }

    #[test]
    fn default_is_exec_and_files_in() {
        let d = default_capabilities();
        assert_eq!(d.len(), 2);
        assert!(d.contains(&Capability::Exec) && d.contains(&Capability::FilesIn));
    }
}
