//! A spec's egress, as the local sandbox enforces it: `closed` is no network at all;
//! `allowlist` is the broker-side proxy of `airlock-egress`, reached only through the listener
//! handed out of the sandbox's own network namespace.
use airlock_egress::{EgressSpec, Rules};
use airlock_policy::{Egress, SandboxSpec};

use crate::config::LocalConfig;

/// The egress every run of a sandbox acquired for `spec` gets. The private ranges an allowed
/// host may resolve into are the host's decision (`LocalConfig::egress_allow_private`), never
/// the spec's.
pub fn for_spec(spec: &SandboxSpec, config: &LocalConfig) -> Result<EgressSpec, String> {
    match spec.egress() {
        Egress::Closed => Ok(EgressSpec::Closed),
        Egress::Allowlist => {
            airlock_egress::availability()?;
            let deny: [&str; 0] = [];
            Rules::parse(spec.egress_allow(), &deny, &config.egress_allow_private)
                .map(EgressSpec::Allowlist)
                .map_err(|e| format!("egress allowlist: {e}"))
        }
        // The router never routes an unrestricted spec here (nothing declares it); refuse
        // rather than guess.
        Egress::Unrestricted => Err("unrestricted egress is never served".into()),
    }
}
