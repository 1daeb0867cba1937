//! The seven-rung isolation ladder and its one rank table.

use crate::vocab::vocabulary;

/// How strong a boundary a backend draws, weakest to strongest.
///
/// The only ordering is [`Isolation::rank`]; `Ord` is derived from it, never from the
/// declaration order or a persisted integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// No boundary at all: the workload runs in the host process with the host's authority.
    None,
    /// A software boundary inside the host process (restricted interpreter, WASM runtime).
    Runtime,
    /// A separate OS process: a kernel-enforced address space sharing kernel and filesystem.
    OsProcess,
    /// Shared-kernel namespaces and cgroups.
    Container,
    /// Syscall interception in a userspace kernel (gVisor-class).
    HardenedContainer,
    /// A hypervisor boundary with a minimal guest and no ambient identity: the default floor.
    Microvm,
    /// A dedicated, full VM provisioned for the workload.
    Vm,
}

vocabulary!(Isolation, "isolation rung", {
    None => "none",
    Runtime => "runtime",
    OsProcess => "os_process",
    Container => "container",
    HardenedContainer => "hardened_container",
    Microvm => "microvm",
    Vm => "vm",
});

impl Isolation {
    /// The router's default floor.
    pub const DEFAULT_FLOOR: Isolation = Isolation::Microvm;

    /// The one rank table. Higher is stronger. Do not persist these numbers: inserting a rung
    /// renumbers everything above it.
    #[must_use]
    pub const fn rank(self) -> u8 {
        match self {
            Isolation::None => 0,
            Isolation::Runtime => 1,
            Isolation::OsProcess => 2,
            Isolation::Container => 3,
            Isolation::HardenedContainer => 4,
            Isolation::Microvm => 5,
            Isolation::Vm => 6,
        }
    }

    /// Whether this rung is at or above `floor`.
    #[must_use]
    pub const fn meets_floor(self, floor: Isolation) -> bool {
        self.rank() >= floor.rank()
    }

    /// The stricter (higher) of two rungs.
    #[must_use]
    pub const fn stricter(self, other: Isolation) -> Isolation {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }
}

impl PartialOrd for Isolation {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Isolation {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::VocabError;

    #[test]
    fn ladder_is_strictly_increasing_in_declaration_order() {
        for pair in Isolation::ALL.windows(2) {
            assert!(pair[0] < pair[1], "{} !< {}", pair[0], pair[1]);
        }
        assert_eq!(Isolation::ALL.len(), 7);
    }

    #[test]
    fn every_spelling_round_trips() {
        for rung in Isolation::ALL {
            assert_eq!(rung.as_str().parse::<Isolation>(), Ok(*rung));
        }
    }

    #[test]
    fn legacy_process_is_refused_not_aliased() {
        let err = "process".parse::<Isolation>().unwrap_err();
        assert!(matches!(err, VocabError::Retired { .. }), "{err:?}");
        assert!(err.to_string().contains("os_process"));
    }

    #[test]
    fn unknown_rungs_are_refused() {
        for bad in ["", "VM", "micro_vm", "gvisor", " vm"] {
            assert!(
                matches!(bad.parse::<Isolation>(), Err(VocabError::Unknown { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn floor_and_stricter() {
        assert!(Isolation::Vm.meets_floor(Isolation::Microvm));
        assert!(!Isolation::Container.meets_floor(Isolation::Microvm));
        assert_eq!(Isolation::Container.stricter(Isolation::Vm), Isolation::Vm);
        assert_eq!(Isolation::Vm.stricter(Isolation::None), Isolation::Vm);
    }

    #[test]
    fn serde_uses_the_same_table() {
        let v: Isolation = serde_json::from_str("\"os_process\"").unwrap();
        assert_eq!(v, Isolation::OsProcess);
        assert!(serde_json::from_str::<Isolation>("\"process\"").is_err());
    }
}
