//! The workload spec: what a sandbox must be for one kind of workload.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::capability::Capability;
use crate::egress::Egress;
use crate::identity::Identity;
use crate::isolation::Isolation;
use crate::limits::TransferLimits;
use crate::os_family::OsFamily;
use crate::scope::IsolationScope;

/// Longest accepted egress host name (the DNS limit).
pub const MAX_HOST_BYTES: usize = 253;

/// A spec that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The kind is empty.
    #[error("sandbox spec kind is empty")]
    EmptyKind,
    /// Hosts were named for a workload that does not run under an allowlist.
    #[error("egress hosts are the payload of an allowlist run, but the spec's egress is {egress}")]
    HostsWithoutAllowlist {
        /// The egress the spec asked for.
        egress: Egress,
    },
    /// A host name is not a plain DNS name (optionally `*.`-prefixed).
    #[error("egress host {host:?} is not a valid host name")]
    InvalidHost {
        /// The refused host.
        host: String,
    },
    /// The work dir is not an absolute, normalised POSIX path.
    #[error("work dir {work_dir:?} must be an absolute path without '.', '..' or empty segments")]
    InvalidWorkDir {
        /// The refused work dir.
        work_dir: String,
    },
    /// A stateful kernel was asked for in call scope, where every run is a fresh process.
    #[error("a stateful sandbox keeps its interpreter across runs; call scope gives every run a fresh process (use conversation scope)")]
    StatefulCallScope,
}

/// What a workload needs from a sandbox. Build one with [`SandboxSpec::builder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    kind: String,
    image: Option<String>,
    work_dir: String,
    egress: Egress,
    egress_allow: Vec<String>,
    requires: BTreeSet<Capability>,
    min_isolation: Option<Isolation>,
    isolation_scope: IsolationScope,
    requires_os_family: Option<OsFamily>,
    files_in: TransferLimits,
    files_out: TransferLimits,
    identities: BTreeSet<Identity>,
    stateful: bool,
    restricted: bool,
}

impl SandboxSpec {
    /// The default guest working directory.
    pub const DEFAULT_WORK_DIR: &'static str = "/work";

    /// A builder for a spec of `kind`: closed egress, conversation scope, default transfer
    /// limits, requiring exec and files-in, no floor of its own.
    pub fn builder(kind: impl Into<String>) -> SandboxSpecBuilder {
        SandboxSpecBuilder {
            spec: SandboxSpec {
                kind: kind.into(),
                image: None,
                work_dir: SandboxSpec::DEFAULT_WORK_DIR.to_owned(),
                egress: Egress::Closed,
                egress_allow: Vec::new(),
                requires: crate::capability::default_capabilities(),
                min_isolation: None,
                isolation_scope: IsolationScope::Conversation,
                requires_os_family: None,
                files_in: TransferLimits::DEFAULT,
                files_out: TransferLimits::DEFAULT,
                identities: BTreeSet::new(),
                stateful: false,
                restricted: false,
            },
        }
    }

    /// The workload kind.
    #[must_use]
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// The guest image, when the backend hands out images.
    #[must_use]
    pub fn image(&self) -> Option<&str> {
        self.image.as_deref()
    }
    /// The guest working directory (absolute).
    #[must_use]
    pub fn work_dir(&self) -> &str {
        &self.work_dir
    }
    /// The egress mode the workload runs in.
    #[must_use]
    pub fn egress(&self) -> Egress {
        self.egress
    }
    /// The allowed hosts (only under [`Egress::Allowlist`]; empty means no network).
    #[must_use]
    pub fn egress_allow(&self) -> &[String] {
        &self.egress_allow
    }
    /// Capabilities the workload cannot run without.
    #[must_use]
    pub fn requires(&self) -> &BTreeSet<Capability> {
        &self.requires
    }
    /// The spec's own floor; the effective floor is the stricter of this and the host's.
    #[must_use]
    pub fn min_isolation(&self) -> Option<Isolation> {
        self.min_isolation
    }
    /// The scope the workload asks for; the effective scope is the stricter of this and the host's.
    #[must_use]
    pub fn isolation_scope(&self) -> IsolationScope {
        self.isolation_scope
    }
    /// The guest shape the workload's commands are written for, if it cares.
    #[must_use]
    pub fn requires_os_family(&self) -> Option<OsFamily> {
        self.requires_os_family
    }
    /// Host-to-guest transfer limits.
    #[must_use]
    pub fn files_in(&self) -> &TransferLimits {
        &self.files_in
    }
    /// Guest-to-host transfer limits.
    #[must_use]
    pub fn files_out(&self) -> &TransferLimits {
        &self.files_out
    }
    /// This spec with its `files_out` lowered, field by field, to `ceiling` (a caller that
    /// can carry less than the spec allows, e.g. one wire response).
    #[must_use]
    pub fn with_files_out_within(&self, ceiling: &TransferLimits) -> SandboxSpec {
        let mut spec = self.clone();
        spec.files_out = spec.files_out.min(ceiling);
        spec
    }
    /// The authorities the workload's host tools exercise.
    #[must_use]
    pub fn identities(&self) -> &BTreeSet<Identity> {
        &self.identities
    }
    /// True when `run_code` calls share one long-lived interpreter (a kernel): globals,
    /// imports and objects persist from one call to the next.
    #[must_use]
    pub fn stateful(&self) -> bool {
        self.stateful
    }
    /// True when programs run under the restricted language profile (allowlisted builtins,
    /// blocked imports): a language-level guard inside the OS layers, not a rung of its own.
    #[must_use]
    pub fn restricted(&self) -> bool {
        self.restricted
    }
}

/// Builds a [`SandboxSpec`]; [`SandboxSpecBuilder::build`] validates it.
#[derive(Debug, Clone)]
#[must_use]
pub struct SandboxSpecBuilder {
    spec: SandboxSpec,
}

impl SandboxSpecBuilder {
    /// The guest image.
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.spec.image = Some(image.into());
        self
    }
    /// The guest working directory.
    pub fn work_dir(mut self, work_dir: impl Into<String>) -> Self {
        self.spec.work_dir = work_dir.into();
        self
    }
    /// The egress mode.
    pub fn egress(mut self, egress: Egress) -> Self {
        self.spec.egress = egress;
        self
    }
    /// The allowed hosts; refused at [`build`](Self::build) unless egress is allowlist.
    pub fn egress_allow<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.spec.egress_allow = hosts.into_iter().map(Into::into).collect();
        self
    }
    /// Replaces the required capabilities.
    pub fn requires(mut self, caps: impl IntoIterator<Item = Capability>) -> Self {
        self.spec.requires = caps.into_iter().collect();
        self
    }
    /// Adds one required capability.
    pub fn require(mut self, cap: Capability) -> Self {
        self.spec.requires.insert(cap);
        self
    }
    /// Raises the floor for this workload (never lowers the host's).
    pub fn min_isolation(mut self, floor: Isolation) -> Self {
        self.spec.min_isolation = Some(floor);
        self
    }
    /// The isolation scope.
    pub fn isolation_scope(mut self, scope: IsolationScope) -> Self {
        self.spec.isolation_scope = scope;
        self
    }
    /// The guest OS family the workload is written for.
    pub fn requires_os_family(mut self, family: OsFamily) -> Self {
        self.spec.requires_os_family = Some(family);
        self
    }
    /// Host-to-guest limits.
    pub fn files_in(mut self, limits: TransferLimits) -> Self {
        self.spec.files_in = limits;
        self
    }
    /// Guest-to-host limits.
    pub fn files_out(mut self, limits: TransferLimits) -> Self {
        self.spec.files_out = limits;
        self
    }
    /// The authorities the workload's host tools exercise.
    pub fn identities(mut self, ids: impl IntoIterator<Item = Identity>) -> Self {
        self.spec.identities = ids.into_iter().collect();
        self
    }

    /// Programs run under the host's restricted language profile.
    pub fn restricted(mut self, on: bool) -> Self {
        self.spec.restricted = on;
        self
    }
    /// One interpreter serves every `run_code` (conversation scope only).
    pub fn stateful(mut self, on: bool) -> Self {
        self.spec.stateful = on;
        self
    }

    /// Validates and returns the spec.
    pub fn build(self) -> Result<SandboxSpec, SpecError> {
        let spec = self.spec;
        if spec.kind.is_empty() {
            return Err(SpecError::EmptyKind);
        }
        if spec.stateful && spec.isolation_scope == IsolationScope::Call {
            return Err(SpecError::StatefulCallScope);
        }
        if !spec.egress_allow.is_empty() && spec.egress != Egress::Allowlist {
            return Err(SpecError::HostsWithoutAllowlist {
                egress: spec.egress,
            });
        }
        if let Some(bad) = spec.egress_allow.iter().find(|h| !valid_host(h)) {
            return Err(SpecError::InvalidHost { host: bad.clone() });
        }
        if !valid_work_dir(&spec.work_dir) {
            return Err(SpecError::InvalidWorkDir {
                work_dir: spec.work_dir,
            });
        }
        Ok(spec)
    }
}

/// A DNS name of letters, digits and hyphens, optionally prefixed by `*.`.
/// `name`, `*.suffix`, or either with `:port` (1-65535), as the egress proxy's rules read them.
fn valid_host(host: &str) -> bool {
    let bare = match host.rsplit_once(':') {
        Some((name, port)) => match port.parse::<u16>() {
            Ok(p) if p != 0 && !port.starts_with('+') => name,
            _ => return false,
        },
        None => host,
    };
    let name = bare.strip_prefix("*.").unwrap_or(bare);
    !name.is_empty()
        && host.len() <= MAX_HOST_BYTES
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Absolute, with no `.`, `..` or empty segments (a lone `/` is refused: a work dir is a
/// directory the backend may remove things under).
fn valid_work_dir(dir: &str) -> bool {
    match dir.strip_prefix('/') {
        Some(rest) if !rest.is_empty() => rest
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains('\0')),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_closed_conversation() {
        let s = SandboxSpec::builder("bicep").build().unwrap();
        assert_eq!(s.egress(), Egress::Closed);
        assert!(s.egress_allow().is_empty());
        assert_eq!(s.isolation_scope(), IsolationScope::Conversation);
        assert_eq!(s.requires(), &crate::capability::default_capabilities());
        assert_eq!(s.work_dir(), "/work");
    }

    #[test]
    fn allowlist_hosts_may_carry_a_port() {
        let ok = SandboxSpec::builder("k")
            .egress(Egress::Allowlist)
            .egress_allow(["api.example.org:8443", "*.pypi.org:443", "127.0.0.2:8080"])
            .build();
        assert!(ok.is_ok(), "{ok:?}");
        for bad in [
            "example.org:0",
            "example.org:99999",
            "example.org:",
            "example.org:+80",
            ":80",
        ] {
            let r = SandboxSpec::builder("k")
                .egress(Egress::Allowlist)
                .egress_allow([bad])
                .build();
            assert!(
                matches!(r, Err(SpecError::InvalidHost { .. })),
                "{bad}: {r:?}"
            );
        }
    }

    #[test]
    fn hosts_without_allowlist_is_a_construction_error() {
        for egress in [Egress::Closed, Egress::Unrestricted] {
            let err = SandboxSpec::builder("k")
                .egress(egress)
                .egress_allow(["example.invalid"])
                .build()
                .unwrap_err();
            assert_eq!(err, SpecError::HostsWithoutAllowlist { egress });
        }
        let ok = SandboxSpec::builder("k")
            .egress(Egress::Allowlist)
            .egress_allow(["example.invalid", "*.pypi.org"])
            .build()
            .unwrap();
        assert_eq!(ok.egress_allow().len(), 2);
    }

    #[test]
    fn invalid_hosts_and_work_dirs_are_refused() {
        for host in ["", "a..b", "http://x", "x/y", "-a.b", "a b"] {
            let err = SandboxSpec::builder("k")
                .egress(Egress::Allowlist)
                .egress_allow([host])
                .build()
                .unwrap_err();
            assert!(matches!(err, SpecError::InvalidHost { .. }), "{host:?}");
        }
        for dir in ["", "/", "work", "/a/../b", "/a//b", "/a/./b"] {
            let err = SandboxSpec::builder("k").work_dir(dir).build().unwrap_err();
            assert!(matches!(err, SpecError::InvalidWorkDir { .. }), "{dir:?}");
        }
        assert_eq!(
            SandboxSpec::builder("").build().unwrap_err(),
            SpecError::EmptyKind
        );
    }
}
