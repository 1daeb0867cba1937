//! A new sandbox's admission to the budget ([`crate::registry::budget`]): its tenant's egress ceiling,
//! then its claim (disk bound + run memory + machine bound) reserved — all before the router
//! is asked, so nothing is assembled for a sandbox the host could not hold.
use airlock_broker::Limits;
use airlock_policy::tenant_quota::within_ceiling;
use airlock_policy::Capability;

use crate::registry::budget::{Claim, Reservation};
use crate::registry::error::{Fact, ServerError};
use crate::registry::request::NewSandbox;
use crate::registry::sandboxes::Sandboxes;

impl Sandboxes {
    /// Refuses a spec whose egress allowlist names a host outside its tenant's ceiling
    /// (`sandbox_refused`, naming the host).
    pub(crate) fn check_egress_ceiling(&self, p: &NewSandbox) -> Result<(), ServerError> {
        let Some(ceiling) = self.budget().quota(&p.tenant).egress_allow else {
            return Ok(());
        };
        let outside = p
            .spec
            .egress_allow()
            .iter()
            .find(|h| !within_ceiling(h, &ceiling));
        match outside {
            None => Ok(()),
            Some(host) => Err(ServerError::refused(format!(
                "tenant {} may not allow {host:?}: it is not in the tenant's egress_allow \
                 ceiling",
                p.tenant
            ))
            .because("TenantEgressNotPermitted")
            .with("host", Fact::Text(host.clone()))),
        }
    }

    /// What a sandbox made for `p` with run `limits` may hold of the host's memory.
    #[must_use]
    pub fn claim_of(&self, p: &NewSandbox, limits: &Limits) -> Claim {
        let req = p.spec.requires();
        let machine = req.contains(&Capability::Processes) || req.contains(&Capability::Ports);
        Claim::new(self.disk_bytes(), limits.memory_bytes, machine)
    }

    /// Reserve a new sandbox's share of the budget, or `over_capacity` saying the numbers.
    pub(crate) fn admit(
        &self,
        p: &NewSandbox,
        limits: &Limits,
    ) -> Result<Reservation, ServerError> {
        let claim = self.claim_of(p, limits);
        self.budget().reserve(&p.tenant, claim).map_err(|r| {
            tracing::warn!(tenant = %p.tenant, refusal = %r, "sandbox not admitted");
            r.to_error()
        })
    }
}
