//! One assembly of the local backend behind the router, under the host's policy, shared by
//! `airlock serve` (its session sandboxes) and `airlock mcp` (a session's sandboxes).
//!
//! With a policy, the router holds its floor, denied capabilities and identities, transfer
//! ceilings and failed-reclaim choice, and sandboxes run under its restricted profile. Without
//! one, the floor is the backend's own rung: what this machine's sandbox holds is served, and
//! anything that asks for more is refused.
use std::sync::Arc;

use airlock_policy::Policy;
use airlock_router::{Backend, Observers, Router, RouterConfigError, SandboxObserver};
use thiserror::Error;

use crate::backend::{LocalBackend, LocalError};
use crate::config::LocalConfig;

/// The local backend and the router in front of it.
#[derive(Debug)]
pub struct Assembly {
    /// The backend (its probed rung, its live sandboxes).
    pub backend: Arc<LocalBackend>,
    /// The router over that one backend.
    pub router: Router,
}

/// Why no [`Assembly`] could be made.
#[derive(Debug, Error)]
pub enum AssemblyError {
    /// The backend could not be set up (e.g. the executor binary is missing).
    #[error("setting up the local backend")]
    Backend(#[source] LocalError),
    /// The router refused its configuration, e.g. a policy floor above this machine's rung
    /// (`RouterConfigError::NotPermitted`). The backend is kept so a caller can word the
    /// refusal with what this machine's sandbox is ([`LocalBackend::probe`]).
    #[error("building the router")]
    Router {
        /// The backend that was set up.
        backend: Arc<LocalBackend>,
        /// The router's refusal.
        #[source]
        source: RouterConfigError,
    },
}

/// Set up the local backend for `config` and the router over it, under `policy` (or the
/// backend's own rung as the floor). `observer`, when given, sees the router's events and the
/// backend's egress decisions (it replaces `config.observer`); `config` is otherwise used as
/// given, except that a policy's restricted profile replaces `config.restricted`.
pub fn assemble(
    mut config: LocalConfig,
    policy: Option<&Policy>,
    observer: Option<Arc<dyn SandboxObserver>>,
) -> Result<Assembly, AssemblyError> {
    if let Some(p) = policy {
        config.restricted = p.restricted.clone();
    }
    if let Some(o) = &observer {
        config.observer = Observers::new(Some(Arc::clone(o)));
    }
    let backend = Arc::new(LocalBackend::new(config).map_err(AssemblyError::Backend)?);
    let mut builder = Router::builder(vec![Arc::clone(&backend) as Arc<dyn Backend>]);
    if let Some(o) = observer {
        builder = builder.observer(o);
    }
    builder = match policy {
        Some(p) => builder.policy(p),
        None => builder.min_isolation(backend.isolation()),
    };
    match builder.build() {
        Ok(router) => Ok(Assembly { backend, router }),
        Err(source) => Err(AssemblyError::Router { backend, source }),
    }
}
