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

use crate::backend::LocalRouter;
use thiserror::Error;

use crate::backend::{LocalBackend, LocalError};
use crate::config::LocalConfig;

/// The local backend and the router in front of it.
#[derive(Debug)]
pub struct Assembly {
    /// The backend (its probed rung, its live sandboxes).
    pub backend: Arc<LocalBackend>,
    /// The router over that one backend.
    pub router: LocalRouter,
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
    let backend = LocalBackend::new(config).map_err(AssemblyError::Backend)?;
    route(Arc::new(backend), policy, observer)
}

/// The router over `backend`, under `policy` or the backend's own rung.
fn route(
    backend: Arc<LocalBackend>,
    policy: Option<&Policy>,
    observer: Option<Arc<dyn SandboxObserver>>,
) -> Result<Assembly, AssemblyError> {
    let mut builder = Router::builder(vec![Arc::clone(&backend)]);
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

#[cfg(test)]
mod tests {
    use airlock_policy::Isolation;

    use super::*;
    use crate::rung::RungProbe;

    /// A backend that declares `os_process`, over an executor path that exists.
    fn os_process_backend() -> Arc<LocalBackend> {
        let probe = RungProbe {
            isolation: Isolation::OsProcess,
            namespaces: false,
            cgroups: false,
            detail: "test: no namespaces".to_owned(),
        };
        let config = LocalConfig::new(std::env::current_exe().unwrap());
        Arc::new(LocalBackend::with_probe(config, probe).unwrap())
    }

    #[test]
    fn a_missing_executor_is_a_backend_error() {
        let config = LocalConfig::new("/nonexistent/airlock");
        let err = assemble(config, None, None).unwrap_err();
        assert!(matches!(err, AssemblyError::Backend(_)), "{err:?}");
    }

    #[test]
    fn without_a_policy_the_floor_is_the_backends_own_rung() {
        assert!(route(os_process_backend(), None, None).is_ok());
    }

    #[test]
    fn a_floor_above_the_rung_keeps_the_backend_and_the_refusal() {
        let policy = Policy::default(); // floor microvm
        let Err(AssemblyError::Router { backend, source }) =
            route(os_process_backend(), Some(&policy), None)
        else {
            panic!("the router was built under a floor above the rung");
        };
        assert!(
            matches!(source, RouterConfigError::NotPermitted(_)),
            "{source}"
        );
        assert_eq!(backend.probe().detail, "test: no namespaces");
    }
}
