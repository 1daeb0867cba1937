//! airlock-egress: the broker-side proxy that serves the `allowlist` egress mode.
//!
//! In allowlist mode the sandbox has a loopback-only network namespace whose one listener,
//! `127.0.0.1:`[`PROXY_PORT`], was created by the sandbox's pid 1 before any untrusted code
//! and handed to the broker; the guest never holds it. The broker serves [`Proxy`] on it:
//! each connection sends one request head (`CONNECT host:port`, or a plain-HTTP request in
//! absolute form); the proxy checks the host rules ([`Rules`]: exact names, `*.suffix`,
//! optional ports, deny wins), resolves the name itself ([`Resolver`]; the sandbox has no
//! DNS), refuses private, loopback, link-local, metadata and other special addresses unless
//! explicitly opted into ([`ranges`]), connects from the broker's own network namespace to
//! exactly the address it vetted (never resolving again, so DNS rebinding cannot swap it),
//! and records every allow and deny ([`Decision`]). A denied request gets an HTTP answer that
//! says which host, why, and that no other route exists.
//!
//! See docs/egress.md.

pub mod cidr;
pub mod decision;
mod error;
pub mod framing;
pub mod head;
pub mod proxy;
pub mod pump;
pub mod ranges;
pub mod reply;
pub mod resolve;
pub mod rules;
pub mod syntax;
pub mod vet;

pub use cidr::Cidr;
pub use decision::{Decision, DecisionLog, DecisionSink, DenyReason};
pub use error::RuleError;
pub use proxy::{Proxy, ProxyLimits};
pub use resolve::{Resolver, StaticResolver, SystemResolver};
pub use rules::{Host, HostRule, HostVerdict, Rules};

/// The port of the proxy listener inside the sandbox (on `127.0.0.1`).
pub const PROXY_PORT: u16 = 3128;

/// Most decisions kept in one run's result; later ones are counted, not kept.
pub const MAX_DECISIONS: usize = 256;

/// The lowest Landlock ABI with TCP port rules (Linux 6.7).
pub const MIN_LANDLOCK_NET_ABI: u32 = 4;

/// A run's egress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EgressSpec {
    /// No network at all (no sockets; the namespace has only `lo`). The default.
    #[default]
    Closed,
    /// Only what the rules allow, through the broker's proxy.
    Allowlist(Rules),
}

impl EgressSpec {
    /// Whether this is the closed mode.
    pub fn is_closed(&self) -> bool {
        matches!(self, EgressSpec::Closed)
    }
}

/// The environment a guest gets in allowlist mode (both spellings: tools differ).
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
        .into_iter()
        .map(|k| (k.to_string(), url.clone()))
        .chain([
            ("NO_PROXY".to_string(), String::new()),
            ("no_proxy".to_string(), String::new()),
        ])
        .collect()
}

/// Whether allowlist mode can be enforced on this machine: it needs Landlock with TCP port
/// rules, so the guest can connect to the proxy port and nothing else. `Err` says what is
/// missing and how to fix it.
pub fn availability() -> Result<(), String> {
    match airlock_jail::landlock::abi_version() {
        Some(abi) if abi >= MIN_LANDLOCK_NET_ABI => Ok(()),
        Some(abi) => Err(format!(
            "allowlist egress needs Landlock ABI >= {MIN_LANDLOCK_NET_ABI} (TCP port rules, \
             Linux 6.7+); this kernel has ABI {abi}: upgrade the kernel or use closed egress"
        )),
        None => Err(
            "allowlist egress needs Landlock (ABI >= 4, Linux 6.7+), which is not enabled: boot \
             with landlock in the lsm= parameter, or use closed egress"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_env_points_at_the_proxy_port() {
        let env = proxy_env();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("HTTPS_PROXY").as_deref(), Some("http://127.0.0.1:3128"));
        assert_eq!(get("http_proxy").as_deref(), Some("http://127.0.0.1:3128"));
        assert_eq!(get("NO_PROXY").as_deref(), Some(""));
    }

    #[test]
    fn availability_follows_the_landlock_abi() {
        let abi = airlock_jail::landlock::abi_version();
        assert_eq!(
            availability().is_ok(),
            abi.is_some_and(|a| a >= 4),
            "{:?}",
            availability()
        );
    }
}
