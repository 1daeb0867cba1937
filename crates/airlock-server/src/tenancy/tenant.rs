//! Who a connection acts for: a tenant's name. Every sandbox, run, process, file transfer,
//! snapshot and audit line belongs to the tenant whose connection made it; a server that
//! serves one token serves one tenant, [`Tenant::single`].
use std::sync::Arc;

/// A tenant's name (cheap to clone).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(Arc<str>);

/// The name of the one tenant of a single-token (or stdio) server.
pub const SINGLE: &str = "default";

impl Tenant {
    /// The tenant named `name`.
    #[must_use]
    pub fn new(name: &str) -> Self {
        Tenant(Arc::from(name))
    }

    /// The one tenant of a single-token server.
    #[must_use]
    pub fn single() -> Self {
        Tenant::new(SINGLE)
    }

    /// Its name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Tenant {
    fn default() -> Self {
        Tenant::single()
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The router's scope for a tenant's `scope`: unchanged for a single-token server's one
/// tenant, `NAME:scope` for a named tenant (a name holds no `:`, so no two tenants' scopes
/// are ever equal).
#[must_use]
pub fn tenant_scope(tenant: &Tenant, scope: &str) -> String {
    if *tenant == Tenant::single() {
        scope.to_owned()
    } else {
        format!("{tenant}:{scope}")
    }
}

/// The scope the orchestrator gave, from the router's (the inverse of [`tenant_scope`]).
#[must_use]
pub fn wire_scope<'a>(tenant: &Tenant, scope: &'a str) -> &'a str {
    if *tenant == Tenant::single() {
        return scope;
    }
    scope
        .strip_prefix(tenant.as_str())
        .and_then(|s| s.strip_prefix(':'))
        .unwrap_or(scope)
}
