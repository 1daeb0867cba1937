//! Roots made ahead for call-scoped sandboxes (`LocalConfig::ready_call_roots`), so a one-run
//! sandbox (`execute`) joins a root that exists, as a live sandbox's run does, instead of its
//! stage building one on the run's critical path.
//!
//! A reserved root is made exactly as `sandbox.create` makes one (`crate::root::new_fs`: the
//! system root with the interpreter's tree, the config's disk bounds), handed to exactly one
//! sandbox and freed with it. Only the host-root kind is reserved (no image). The reserve is
//! refilled in the background once a call sandbox is disposed (its run is over, as the warm
//! pool refills), one root at a time; an empty reserve means the run's stage builds the root
//! as before.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use airlock_broker::SandboxFs;

use crate::config::LocalConfig;
use crate::root::new_fs;

/// Roots ready for call-scoped sandboxes.
#[derive(Debug)]
pub(crate) struct RootReserve {
    config: Arc<LocalConfig>,
    stock: Mutex<Vec<SandboxFs>>,
    filling: AtomicBool,
}

impl RootReserve {
    pub(crate) fn new(config: Arc<LocalConfig>) -> Arc<Self> {
        Arc::new(RootReserve {
            config,
            stock: Mutex::new(Vec::new()),
            filling: AtomicBool::new(false),
        })
    }

    fn target(&self) -> usize {
        self.config.ready_call_roots
    }

    /// A ready root, if one is. An empty reserve starts filling (the first take); otherwise
    /// it is refilled when a call sandbox is disposed ([`RootReserve::refill`]), so making a
    /// root never competes for the cores with the run that took one.
    pub(crate) fn take(self: &Arc<Self>) -> Option<SandboxFs> {
        if self.target() == 0 {
            return None;
        }
        let fs = self
            .stock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        if fs.is_none() {
            self.refill();
        }
        fs
    }

    /// Make roots in the background until the target is reached (one filler at a time; needs
    /// a tokio runtime, does nothing outside one).
    pub(crate) fn refill(self: &Arc<Self>) {
        if self.target() == 0 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.filling.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        runtime.spawn(async move {
            while me.len() < me.target() {
                match new_fs(&me.config, None).await {
                    Ok(fs) => me
                        .stock
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(fs),
                    Err(e) => {
                        tracing::warn!(error = %e, "making a root ahead for a call sandbox");
                        break;
                    }
                }
            }
            me.filling.store(false, Ordering::Release);
        });
    }

    fn len(&self) -> usize {
        self.stock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}
