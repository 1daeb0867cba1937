//! One sandbox's background processes, by id.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::init::Machine;
use super::process::{self, Process, ProcessError, ProcessRequest};
use crate::sandbox_fs::SandboxFs;

/// Processes that may run at once in one sandbox (each also counts against the sandbox's
/// process limit inside).
pub const MAX_PROCESSES: usize = 32;
/// Ended processes kept (for `wait`, `list` and their output) before the oldest is forgotten.
const KEPT_ENDED: usize = 32;
/// How long the end of a sandbox waits for each process's stage to be reaped.
const END_WAIT: Duration = Duration::from_secs(5);

/// The processes of one sandbox.
#[derive(Debug, Default)]
pub struct Processes {
    next: AtomicU64,
    all: Mutex<Vec<Arc<Process>>>,
    /// One start at a time, so the count checked is the count started.
    starting: tokio::sync::Mutex<()>,
}

impl Processes {
    fn all(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Process>>> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Start `req` in the machine of `fs`.
    pub async fn start(
        &self,
        fs: &Arc<SandboxFs>,
        machine: &Arc<Machine>,
        req: ProcessRequest,
    ) -> Result<Arc<Process>, ProcessError> {
        let _one_at_a_time = self.starting.lock().await;
        let running = self.all().iter().filter(|p| p.exit().is_none()).count();
        if running >= MAX_PROCESSES {
            return Err(ProcessError::Refused(format!(
                "{running} processes run in this sandbox, the most it may have at once \
                 ({MAX_PROCESSES}); wait for or kill one first"
            )));
        }
        let id = format!("proc-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let p = process::start(id, fs, machine, req).await?;
        let mut all = self.all();
        all.push(Arc::clone(&p));
        let ended: Vec<usize> = all
            .iter()
            .enumerate()
            .filter(|(_, p)| p.exit().is_some())
            .map(|(i, _)| i)
            .collect();
        if ended.len() > KEPT_ENDED {
            let forget = ended.len() - KEPT_ENDED;
            let mut gone = 0;
            all.retain(|p| {
                let drop_it = gone < forget && p.exit().is_some();
                gone += usize::from(drop_it);
                !drop_it
            });
        }
        Ok(p)
    }

    /// The process `id`, if this sandbox has (or recently had) it.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<Arc<Process>> {
        self.all().iter().find(|p| p.id == id).cloned()
    }

    /// Every process, oldest first.
    #[must_use]
    pub fn list(&self) -> Vec<Arc<Process>> {
        self.all().clone()
    }

    /// Once the machine has ended (every process killed), wait until each one's stage is
    /// reaped and its end recorded.
    pub async fn reap_all(&self) {
        for p in self.list() {
            if p.exit().is_none() {
                p.signal(9);
                let _ = p.wait(END_WAIT).await;
            }
        }
    }
}
