//! What a backend declares about itself, with each field's own silence rule.
//!
//! Every field is an `Option`: `None` is silence, and silence is read per field, never as one
//! rule for all of them:
//!
//! | field | silence reads as | why |
//! |---|---|---|
//! | `capabilities` | `{exec, files_in}` | a functionality claim the `Sandbox` trait already obliges |
//! | `limits` | [`SandboxLimits::DEFAULT`] | the safety rule: the default ceiling, a bigger ask refused |
//! | `egress_modes` | `{}` | nothing is enforced that was not declared: every ask refused |
//! | `os_families` | `{}` | no answer: refuses a spec that asks, serves one that does not |
//! | `isolation_scopes` | `{conversation}` | the one claim: get-or-create every backend does |

use std::collections::BTreeSet;

use crate::capability::{default_capabilities, Capability};
use crate::egress::Egress;
use crate::limits::SandboxLimits;
use crate::os_family::OsFamily;
use crate::scope::IsolationScope;

/// A backend's declarations. `Default` is total silence.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct BackendDeclarations {
    /// What the backend can do; silence is [`default_capabilities`].
    pub capabilities: Option<BTreeSet<Capability>>,
    /// The backend's transfer ceilings; silence is [`SandboxLimits::DEFAULT`].
    pub limits: Option<SandboxLimits>,
    /// The egress modes the backend can enforce; silence is the empty set.
    pub egress_modes: Option<BTreeSet<Egress>>,
    /// The guest OS families the backend hands out; silence is the empty set.
    pub os_families: Option<BTreeSet<OsFamily>>,
    /// The isolation scopes the backend can serve; silence is `{conversation}`.
    pub isolation_scopes: Option<BTreeSet<IsolationScope>>,
}

impl BackendDeclarations {
    /// Total silence (the same as `Default`).
    #[must_use]
    pub fn silent() -> BackendDeclarations {
        BackendDeclarations::default()
    }

    /// Declares the capabilities.
    #[must_use]
    pub fn with_capabilities(mut self, caps: impl IntoIterator<Item = Capability>) -> Self {
        self.capabilities = Some(caps.into_iter().collect());
        self
    }
    /// Declares the transfer ceilings.
    #[must_use]
    pub fn with_limits(mut self, limits: SandboxLimits) -> Self {
        self.limits = Some(limits);
        self
    }
    /// Declares the enforceable egress modes.
    #[must_use]
    pub fn with_egress_modes(mut self, modes: impl IntoIterator<Item = Egress>) -> Self {
        self.egress_modes = Some(modes.into_iter().collect());
        self
    }
    /// Declares the guest OS families.
    #[must_use]
    pub fn with_os_families(mut self, families: impl IntoIterator<Item = OsFamily>) -> Self {
        self.os_families = Some(families.into_iter().collect());
        self
    }
    /// Declares the servable isolation scopes.
    #[must_use]
    pub fn with_isolation_scopes(
        mut self,
        scopes: impl IntoIterator<Item = IsolationScope>,
    ) -> Self {
        self.isolation_scopes = Some(scopes.into_iter().collect());
        self
    }

    /// Capabilities after the silence rule.
    #[must_use]
    pub fn effective_capabilities(&self) -> BTreeSet<Capability> {
        self.capabilities
            .clone()
            .unwrap_or_else(default_capabilities)
    }
    /// Ceilings after the silence rule.
    #[must_use]
    pub fn effective_limits(&self) -> SandboxLimits {
        self.limits.unwrap_or(SandboxLimits::DEFAULT)
    }
    /// Egress modes after the silence rule.
    #[must_use]
    pub fn effective_egress_modes(&self) -> BTreeSet<Egress> {
        self.egress_modes.clone().unwrap_or_default()
    }
    /// OS families after the silence rule.
    #[must_use]
    pub fn effective_os_families(&self) -> BTreeSet<OsFamily> {
        self.os_families.clone().unwrap_or_default()
    }
    /// Isolation scopes after the silence rule.
    #[must_use]
    pub fn effective_isolation_scopes(&self) -> BTreeSet<IsolationScope> {
        self.isolation_scopes
            .clone()
            .unwrap_or_else(|| BTreeSet::from([IsolationScope::Conversation]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_field_has_its_own_silence_rule() {
        let d = BackendDeclarations::silent();
        assert_eq!(d.effective_capabilities(), default_capabilities());
        assert_eq!(d.effective_limits(), SandboxLimits::DEFAULT);
        assert!(d.effective_egress_modes().is_empty());
        assert!(d.effective_os_families().is_empty());
        assert_eq!(
            d.effective_isolation_scopes(),
            BTreeSet::from([IsolationScope::Conversation])
        );
    }

    #[test]
    fn declared_empty_is_not_silence() {
        let d = BackendDeclarations::silent()
            .with_capabilities([])
            .with_isolation_scopes([]);
        assert!(d.effective_capabilities().is_empty());
        assert!(d.effective_isolation_scopes().is_empty());
    }
}
