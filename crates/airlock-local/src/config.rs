//! How a [`LocalBackend`](crate::LocalBackend) is set up: where the `airlock` binary is, where
//! work dirs live, and the limits of every run.

use std::path::PathBuf;
use std::sync::Arc;

use airlock_broker::{Limits, Runner};

/// The backend's configuration.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The `airlock` binary, whose hidden `__executor` subcommand is the executor stage.
    pub executor: PathBuf,
    /// The limits of every run (a run's timeout comes from its own options).
    pub limits: Limits,
    /// The Python interpreter for `run_code` (`python3` on PATH when `None`).
    pub python: Option<PathBuf>,
    /// The interpreter for `run_code` in a sandbox on an image: a name on the image's `PATH`
    /// or a guest path (`python3` when `None`).
    pub image_python: Option<PathBuf>,
    /// Where the images a spec names (`SandboxSpec::image`) are looked up; a spec naming one
    /// is refused without a store.
    pub images: Option<airlock_image::Store>,
    /// Private/loopback ranges (CIDR) an allowlisted host may resolve into; refused otherwise.
    pub egress_allow_private: Vec<String>,
    /// Where egress decisions are reported (each as an [`EgressDecided`] event).
    ///
    /// [`EgressDecided`]: airlock_router::EgressDecided
    pub observer: airlock_router::Observers,
    /// The restricted language profile a sandbox whose spec asks for it runs under.
    pub restricted: airlock_policy::RestrictedProfile,
    /// The front door every run of every sandbox goes through: its slots and queue, and how
    /// a run's process comes to be (zygote, warm pool, exec).
    pub runner: Arc<Runner>,
    /// The host keeps snapshots (`airlock serve` with a state directory): the backend
    /// declares `snapshot`, and a spec may require it.
    pub snapshots: bool,
    /// Stateful sandboxes without a machine start kernels ready to be forked copy-on-write
    /// (`airlock_broker::Kernel::forkable`).
    pub cow_fork: bool,
}

impl LocalConfig {
    /// Defaults around `executor`: a private root, default limits, `python3` on PATH.
    #[must_use]
    pub fn new(executor: impl Into<PathBuf>) -> LocalConfig {
        LocalConfig {
            executor: executor.into(),
            limits: Limits::default(),
            python: None,
            image_python: None,
            images: airlock_image::Store::default_dir().map(airlock_image::Store::open),
            egress_allow_private: Vec::new(),
            observer: airlock_router::Observers::default(),
            restricted: airlock_policy::RestrictedProfile::default(),
            runner: Arc::new(Runner::default()),
            snapshots: false,
            cow_fork: false,
        }
    }
}

/// The profile as the broker hands it to the guest.
#[must_use]
pub fn guard_of(p: &airlock_policy::RestrictedProfile) -> airlock_broker::Restricted {
    airlock_broker::Restricted {
        builtins: p.builtins.iter().cloned().collect(),
        blocked_imports: p.blocked_imports.iter().cloned().collect(),
    }
}
