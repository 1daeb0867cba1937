//! The named refusals: each check that can turn a workload away has its own variant.

use std::collections::BTreeSet;
use std::fmt::Display;

use thiserror::Error;

use crate::capability::Capability;
use crate::disposal::DisposalCode;
use crate::egress::Egress;
use crate::identity::Identity;
use crate::isolation::Isolation;
use crate::limits::{Direction, TransferField};
use crate::os_family::OsFamily;
use crate::scope::IsolationScope;

/// Whose ceiling a transfer ask went above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CeilingOwner {
    /// The host's policy.
    Host,
    /// The backend's declared limits.
    Backend,
}

impl std::fmt::Display for CeilingOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CeilingOwner::Host => "host policy",
            CeilingOwner::Backend => "backend",
        })
    }
}

/// A workload turned away. Refusals are never degraded into something that runs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The backend sits below the effective isolation floor.
    #[error("sandbox backend {backend:?} is not permitted: it declares {isolation}, below the {floor} floor")]
    BackendNotPermitted {
        /// The backend.
        backend: String,
        /// What it declares.
        isolation: Isolation,
        /// The effective floor.
        floor: Isolation,
    },
    /// The spec requires capabilities the host's policy denies.
    #[error(
        "the {kind:?} workload requires {}, denied by host policy",
        join(denied)
    )]
    CapabilityDenied {
        /// The workload kind.
        kind: String,
        /// The denied capabilities it requires.
        denied: BTreeSet<Capability>,
    },
    /// The backend does not declare capabilities the spec requires.
    #[error(
        "sandbox backend {backend:?} does not support {} that the {kind:?} workload requires",
        join(missing)
    )]
    CapabilityNotSupported {
        /// The backend.
        backend: String,
        /// The workload kind.
        kind: String,
        /// The required capabilities the backend lacks.
        missing: BTreeSet<Capability>,
    },
    /// The spec's host tools exercise identities the host's policy denies.
    #[error(
        "the {kind:?} workload exercises identity {}, denied by host policy",
        join(denied)
    )]
    IdentityDenied {
        /// The workload kind.
        kind: String,
        /// The denied identities.
        denied: BTreeSet<Identity>,
    },
    /// The backend does not hand out the guest OS family the spec asks for.
    #[error(
        "sandbox backend {backend:?} does not hand out {asked} guests (it declares: {})",
        join(serves)
    )]
    OsFamilyNotSupported {
        /// The backend.
        backend: String,
        /// What the spec asked for.
        asked: OsFamily,
        /// What the backend declares.
        serves: BTreeSet<OsFamily>,
    },
    /// The spec asks for a transfer cap above a ceiling.
    #[error("the {kind:?} workload asks {direction}.{field} = {asked}, above the {owner} ceiling of {ceiling} on backend {backend:?}")]
    TransferLimitsNotPermitted {
        /// The backend.
        backend: String,
        /// The workload kind.
        kind: String,
        /// Which direction.
        direction: Direction,
        /// Which cap.
        field: TransferField,
        /// What the spec asked.
        asked: u64,
        /// The ceiling it went above.
        ceiling: u64,
        /// Whose ceiling.
        owner: CeilingOwner,
    },
    /// The backend cannot enforce exactly the egress mode the spec runs in.
    #[error("sandbox backend {backend:?} cannot enforce the {asked} egress the {kind:?} workload runs in (it enforces: {})", join(enforces))]
    EgressNotEnforced {
        /// The backend.
        backend: String,
        /// The workload kind.
        kind: String,
        /// The mode the spec runs in.
        asked: Egress,
        /// The modes the backend declares (after its silence rule).
        enforces: BTreeSet<Egress>,
    },
    /// The backend cannot serve the effective isolation scope.
    #[error(
        "sandbox backend {backend:?} cannot serve {scope} scope (it serves: {})",
        join(serves)
    )]
    ScopeNotEnforced {
        /// The backend.
        backend: String,
        /// The effective scope.
        scope: IsolationScope,
        /// The scopes it declares (after its silence rule).
        serves: BTreeSet<IsolationScope>,
    },
    /// A stateful sandbox was asked for, but the host's policy makes every call its own
    /// sandbox (call scope): one interpreter cannot serve successive calls.
    #[error("the {kind:?} workload asks for a stateful sandbox, but host policy's isolation scope is call (every run a fresh process); use conversation scope or a stateless sandbox")]
    StatefulInCallScope {
        /// The workload kind.
        kind: String,
    },
    /// Per-spec routing found no registered backend passing every check.
    #[error(
        "no registered sandbox backend serves the {kind:?} workload: {}",
        join(refusals)
    )]
    NoBackendServes {
        /// The workload kind.
        kind: String,
        /// Each backend's refusal, in registration order.
        refusals: Vec<Refusal>,
    },
    /// The key's last disposal did not land; it is refused until one does.
    #[error(
        "sandbox {key} is unclean: its disposal did not land ({code}); refused until one does"
    )]
    Unclean {
        /// The key, rendered.
        key: String,
        /// The disposal failure's code.
        code: DisposalCode,
    },
    /// The key already holds a live sandbox made for a different spec: a key names one
    /// sandbox, and a second spec never gets the first one's sandbox (its egress, its limits).
    #[error(
        "sandbox {key} is live under a different spec; dispose of it before asking for another"
    )]
    KeySpecMismatch {
        /// The key, rendered.
        key: String,
    },
}

impl Refusal {
    /// The variant's name: what an observer records, never the message.
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            Refusal::BackendNotPermitted { .. } => "SandboxBackendNotPermitted",
            Refusal::CapabilityDenied { .. } => "SandboxCapabilityDenied",
            Refusal::CapabilityNotSupported { .. } => "SandboxCapabilityNotSupported",
            Refusal::IdentityDenied { .. } => "SandboxIdentityDenied",
            Refusal::OsFamilyNotSupported { .. } => "SandboxOsFamilyNotSupported",
            Refusal::TransferLimitsNotPermitted { .. } => "SandboxTransferLimitsNotPermitted",
            Refusal::EgressNotEnforced { .. } => "SandboxEgressNotEnforced",
            Refusal::ScopeNotEnforced { .. } => "SandboxScopeNotEnforced",
            Refusal::StatefulInCallScope { .. } => "SandboxStatefulInCallScope",
            Refusal::NoBackendServes { .. } => "SandboxNoBackendServes",
            Refusal::Unclean { .. } => "SandboxUnclean",
            Refusal::KeySpecMismatch { .. } => "SandboxKeySpecMismatch",
        }
    }
}

fn join<T: Display>(items: impl IntoIterator<Item = T>) -> String {
    let parts: Vec<String> = items.into_iter().map(|i| i.to_string()).collect();
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join(", ")
    }
}
