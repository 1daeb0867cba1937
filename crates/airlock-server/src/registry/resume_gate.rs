//! One resume at a time *per sandbox id*: two calls on one paused sandbox make it once, and a
//! resume of one sandbox never waits on a resume of another (one tenant's slow resume — a big
//! snapshot read, verified and restored — holds up no other tenant's).
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OwnedMutexGuard;

type Gates = HashMap<String, Arc<tokio::sync::Mutex<()>>>;

fn lock(m: &Mutex<Gates>) -> MutexGuard<'_, Gates> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The gates of the resumes under way (or waited for), by sandbox id.
#[derive(Debug, Default)]
pub(crate) struct ResumeGates(Mutex<Gates>);

/// Held while one resume of its sandbox runs; the gate goes when nobody else waits on it.
#[derive(Debug)]
pub(crate) struct ResumeTurn<'a> {
    gates: &'a ResumeGates,
    id: String,
    turn: Option<OwnedMutexGuard<()>>,
}

impl ResumeGates {
    /// Wait for the turn to resume `id` (after any resume of `id` already under way).
    pub(crate) async fn enter(&self, id: &str) -> ResumeTurn<'_> {
        let gate = {
            let mut gates = lock(&self.0);
            // A gate only the map holds is nobody's (its last waiter gave up): drop it.
            gates.retain(|_, g| Arc::strong_count(g) > 1);
            Arc::clone(gates.entry(id.to_owned()).or_default())
        };
        let turn = gate.lock_owned().await;
        ResumeTurn {
            gates: self,
            id: id.to_owned(),
            turn: Some(turn),
        }
    }

    /// Gates held now (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.0).len()
    }
}

impl Drop for ResumeTurn<'_> {
    fn drop(&mut self) {
        let mut gates = lock(&self.gates.0);
        drop(self.turn.take());
        if gates
            .get(&self.id)
            .is_some_and(|g| Arc::strong_count(g) == 1)
        {
            gates.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn another_ids_resume_goes_on_while_one_is_under_way_and_the_same_id_waits() {
        let gates = ResumeGates::default();
        let first = gates.enter("sb-a").await;
        let other = tokio::time::timeout(Duration::from_secs(1), gates.enter("sb-b")).await;
        assert!(other.is_ok(), "another sandbox's resume waited");
        drop(other);
        let same = tokio::time::timeout(Duration::from_millis(100), gates.enter("sb-a")).await;
        assert!(same.is_err(), "two resumes of one sandbox at once");
        drop(first);
        let same = tokio::time::timeout(Duration::from_secs(1), gates.enter("sb-a")).await;
        assert!(
            same.is_ok(),
            "the second resume of one sandbox never got its turn"
        );
        drop(same);
        assert_eq!(gates.len(), 0, "a gate outlived its resumes");
    }
}
