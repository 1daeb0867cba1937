//! The decision: may this backend serve this spec under this host's policy?
//!
//! The checks run in one fixed order and the first failure is the answer:
//!
//! 1. isolation floor (the stricter of host and spec) -> [`Refusal::BackendNotPermitted`]
//! 2. capabilities denied by the host -> [`Refusal::CapabilityDenied`]
//! 3. capabilities the backend lacks -> [`Refusal::CapabilityNotSupported`]
//! 4. identities denied by the host -> [`Refusal::IdentityDenied`]
//! 5. guest OS family -> [`Refusal::OsFamilyNotSupported`]
//! 6. transfer ceilings, files_in then files_out, host then backend ->
//!    [`Refusal::TransferLimitsNotPermitted`]
//! 7. egress mode, exact membership; `unrestricted` is never served ->
//!    [`Refusal::EgressNotEnforced`]
//! 8. isolation scope (the stricter of host and spec) -> [`Refusal::ScopeNotEnforced`]; a
//!    stateful spec under call scope -> [`Refusal::StatefulInCallScope`]

use std::collections::BTreeSet;

use crate::capability::Capability;
use crate::declarations::BackendDeclarations;
use crate::egress::Egress;
use crate::identity::Identity;
use crate::isolation::Isolation;
use crate::limits::{Direction, TransferLimits};
use crate::refusal::{CeilingOwner, Refusal};
use crate::scope::IsolationScope;
use crate::spec::SandboxSpec;

/// The host's side of every decision: the floors and denials only the host may set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPolicy {
    /// The isolation floor; default [`Isolation::Microvm`]. A host opts down explicitly.
    pub min_isolation: Isolation,
    /// The scope floor; default conversation.
    pub min_isolation_scope: IsolationScope,
    /// Capabilities no workload may require, whatever a backend declares.
    pub denied_capabilities: BTreeSet<Capability>,
    /// Identities no workload's host tools may exercise.
    pub denied_identities: BTreeSet<Identity>,
    /// The host's own ceiling on host-to-guest transfers, if it sets one.
    pub files_in_ceiling: Option<TransferLimits>,
    /// The host's own ceiling on guest-to-host transfers, if it sets one.
    pub files_out_ceiling: Option<TransferLimits>,
}

impl Default for HostPolicy {
    fn default() -> Self {
        HostPolicy {
            min_isolation: Isolation::DEFAULT_FLOOR,
            min_isolation_scope: IsolationScope::Conversation,
            denied_capabilities: BTreeSet::new(),
            denied_identities: BTreeSet::new(),
            files_in_ceiling: None,
            files_out_ceiling: None,
        }
    }
}

impl HostPolicy {
    /// The floor this spec runs under: the stricter of the host's and the spec's.
    #[must_use]
    pub fn effective_floor(&self, spec: &SandboxSpec) -> Isolation {
        match spec.min_isolation() {
            Some(own) => self.min_isolation.stricter(own),
            None => self.min_isolation,
        }
    }

    /// The scope this spec runs under: the stricter of the host's and the spec's.
    #[must_use]
    pub fn effective_scope(&self, spec: &SandboxSpec) -> IsolationScope {
        self.min_isolation_scope.stricter(spec.isolation_scope())
    }

    fn ceiling(&self, direction: Direction) -> Option<&TransferLimits> {
        match direction {
            Direction::FilesIn => self.files_in_ceiling.as_ref(),
            Direction::FilesOut => self.files_out_ceiling.as_ref(),
        }
    }
}

/// What a decision reads about one backend.
#[derive(Debug, Clone, Copy)]
pub struct BackendProfile<'a> {
    /// The backend's name.
    pub name: &'a str,
    /// Its declared rung.
    pub isolation: Isolation,
    /// Its declarations.
    pub declarations: &'a BackendDeclarations,
}

/// What a passed decision settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The effective floor the backend cleared.
    pub floor: Isolation,
    /// The effective scope the sandbox is served under.
    pub scope: IsolationScope,
}

/// Runs every check in order; the first failure is returned.
pub fn decide(
    host: &HostPolicy,
    backend: BackendProfile<'_>,
    spec: &SandboxSpec,
) -> Result<Decision, Refusal> {
    let name = || backend.name.to_owned();
    let kind = || spec.kind().to_owned();
    let decl = backend.declarations;

    let floor = host.effective_floor(spec);
    if !backend.isolation.meets_floor(floor) {
        return Err(Refusal::BackendNotPermitted {
            backend: name(),
            isolation: backend.isolation,
            floor,
        });
    }

    let denied: BTreeSet<Capability> = spec
        .requires()
        .intersection(&host.denied_capabilities)
        .copied()
        .collect();
    if !denied.is_empty() {
        return Err(Refusal::CapabilityDenied {
            kind: kind(),
            denied,
        });
    }

    let caps = decl.effective_capabilities();
    let missing: BTreeSet<Capability> = spec.requires().difference(&caps).copied().collect();
    if !missing.is_empty() {
        return Err(Refusal::CapabilityNotSupported {
            backend: name(),
            kind: kind(),
            missing,
        });
    }

    let denied: BTreeSet<Identity> = spec
        .identities()
        .intersection(&host.denied_identities)
        .copied()
        .collect();
    if !denied.is_empty() {
        return Err(Refusal::IdentityDenied {
            kind: kind(),
            denied,
        });
    }

    if let Some(asked) = spec.requires_os_family() {
        let serves = decl.effective_os_families();
        if !serves.contains(&asked) {
            return Err(Refusal::OsFamilyNotSupported {
                backend: name(),
                asked,
                serves,
            });
        }
    }

    let backend_limits = decl.effective_limits();
    for direction in Direction::ALL.iter().copied() {
        let ask = match direction {
            Direction::FilesIn => spec.files_in(),
            Direction::FilesOut => spec.files_out(),
        };
        let ceilings = [
            (CeilingOwner::Host, host.ceiling(direction)),
            (CeilingOwner::Backend, Some(backend_limits.get(direction))),
        ];
        for (owner, ceiling) in ceilings {
            let Some(ceiling) = ceiling else { continue };
            if let Some(field) = ask.first_excess(ceiling) {
                return Err(Refusal::TransferLimitsNotPermitted {
                    backend: name(),
                    kind: kind(),
                    direction,
                    field,
                    asked: ask.get(field),
                    ceiling: ceiling.get(field),
                    owner,
                });
            }
        }
    }

    let enforces = decl.effective_egress_modes();
    let egress_ok = match spec.egress() {
        Egress::Unrestricted => false,
        asked @ (Egress::Allowlist | Egress::Closed) => enforces.contains(&asked),
    };
    if !egress_ok {
        return Err(Refusal::EgressNotEnforced {
            backend: name(),
            kind: kind(),
            asked: spec.egress(),
            enforces,
        });
    }

    let scope = host.effective_scope(spec);
    let serves = decl.effective_isolation_scopes();
    if !serves.contains(&scope) {
        return Err(Refusal::ScopeNotEnforced {
            backend: name(),
            scope,
            serves,
        });
    }
    if spec.stateful() && scope == IsolationScope::Call {
        return Err(Refusal::StatefulInCallScope { kind: kind() });
    }

    Ok(Decision { floor, scope })
}
