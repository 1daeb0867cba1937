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
