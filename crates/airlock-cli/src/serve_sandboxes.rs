//! The sandboxes `airlock serve` holds for its session methods: the local backend behind the
//! router, under the host's policy (its floor, denied capabilities and identities, transfer
//! ceilings). Without a policy the floor is the backend's own rung: the server serves what
//! this machine's sandbox holds, and refuses anything that asks for more.
use std::sync::Arc;

use airlock_local::{assemble, Assembly, LocalConfig};
use airlock_policy::Policy;
use airlock_router::{Observers, SandboxObserver};
use airlock_server::ops::metrics_observer::MetricsObserver;
use airlock_server::registry::sandboxes::Sandboxes;
use airlock_server::telemetry::audit_events::AuditObserver;
use airlock_server::ServerConfig;

/// How much the registry may hold: live sandboxes, and the admission budget they share.
pub struct Capacity {
    /// Live sandboxes at once.
    pub max_live: usize,
    /// The admission budget and the tenants' quotas.
    pub budget: airlock_server::registry::budget::Budget,
}

/// The registry for `config` (the server's run defaults, interpreter and executor);
/// `allow_private`: the special ranges allowlisted hosts may resolve into.
/// The server's snapshots: its state directory, and how it forks.
pub struct Snapshots {
    /// The state directory (none: no snapshots).
    pub state: Option<Arc<airlock_server::state_dir::StateDir>>,
    /// `--fork-copy-on-write`.
    pub copy_on_write: bool,
}

pub fn build(
    config: &ServerConfig,
    policy: Option<&Policy>,
    epoch: &str,
    capacity: Capacity,
    allow_private: &[String],
    image_dir: Option<std::path::PathBuf>,
    snapshots: Snapshots,
) -> anyhow::Result<Arc<Sandboxes>> {
    let Snapshots {
        state,
        copy_on_write,
    } = snapshots;
    let mut local = LocalConfig::new(config.executor.clone());
    local.egress_allow_private = allow_private.to_vec();
    if let Some(dir) = image_dir {
        local.images = Some(airlock_image::Store::open(dir));
    }
    local.limits = config.defaults.clone();
    // Session runs and `execute` share the server's one runner (slots, queue, zygote).
    local.runner = Arc::clone(&config.runner);
    local.python = config.interpreter.clone();
    local.snapshots = state.is_some();
    local.cow_fork = copy_on_write && state.is_some();
    // Policy events go to the audit log next to the run records, egress decisions to the
    // metrics too.
    let audit = config
        .audit
        .as_ref()
        .map(|sink| Arc::new(AuditObserver(Arc::clone(sink))) as Arc<dyn SandboxObserver>);
    let metrics = MetricsObserver::new(Arc::clone(&config.metrics), audit);
    let observer = Some(Arc::new(metrics) as Arc<dyn SandboxObserver>);
    let Assembly { router, .. } = assemble(local, policy, observer.clone())?;
    for w in router.warnings() {
        tracing::warn!(warning = %w, "router");
    }
    Ok(Arc::new(
        Sandboxes::new(
            router,
            epoch.to_owned(),
            capacity.max_live,
            Observers::new(observer),
        )
        .with_budget(capacity.budget, config.defaults.max_disk_bytes)
        .with_audit(config.audit.clone())
        .with_state(state),
    ))
}
