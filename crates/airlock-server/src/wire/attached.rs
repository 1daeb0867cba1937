//! Which background processes one connection hears (so a re-attach never doubles their
//! notifications); `crate::wire::process_api` fills it.
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The processes one connection hears (so a re-attach never doubles the notifications).
#[derive(Debug, Clone, Default)]
pub struct Attached(Arc<Mutex<HashSet<String>>>);

impl Attached {
    fn set(&self) -> MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `id` was newly attached.
    pub(crate) fn insert(&self, id: &str) -> bool {
        self.set().insert(id.to_owned())
    }

    pub(crate) fn remove(&self, id: &str) {
        self.set().remove(id);
    }
}
