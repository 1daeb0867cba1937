//! A stateful sandbox's kernel: one long-lived guest interpreter that serves successive cells.
//!
//! The kernel is a run like any other until its first cell: the same stage, every layer, the
//! same attestation check, its own cgroup. Then, instead of exiting after its answer, the guest
//! waits for the next cell in the same globals. Between cells the broker stops it (`SIGSTOP`:
//! no CPU, no file activity while files move); a cell's timeout or cancel first interrupts it
//! (`SIGINT`, a `KeyboardInterrupt` in the program; the state survives) and, past the grace
//! period, kills it (the result says `kernel_restarted`; the next cell starts a fresh kernel).
//! A memory or disk overrun, a crash or a protocol violation ends it the same way.
mod branch_check;
pub(crate) mod cell;
pub(crate) mod display;
mod door;
mod fork;
mod guard;
mod ids;
mod image;
mod live;
mod pages;
mod procs;
mod seal;
mod signals;
mod start;
mod state;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use airlock_protocol::ErrorCode;

use live::{Cell, Live};

pub use display::{MAX_BYTES as MAX_DISPLAY_BYTES, MAX_ITEMS as MAX_DISPLAY_ITEMS};
pub use fork::ForkError;
pub use image::{peek_image, ImageSource};
pub use state::{SavedState, StateError};

use crate::result::RunResult;
use crate::run::{program_fits, Cancel, RunSpec, Workload};
use crate::sandbox_fs::SandboxFs;
use crate::tools::ToolHandler;

/// The kernel of one stateful sandbox; it starts on the first cell.
#[derive(Default)]
pub struct Kernel {
    live: Option<Live>,
    /// Its processes start ready to be forked copy-on-write (see [`Kernel::forkable`]).
    forkable: bool,
    /// Why its state was lost outside a cell (a fork that failed part way): the next cell
    /// says `kernel_restarted`.
    lost: Option<String>,
    cells: i64,
    /// A paused sandbox's pickled state, loaded by the next kernel that starts.
    restore: Option<std::fs::File>,
    /// A paused sandbox's kernel image, which the next kernel that starts becomes.
    image: Option<std::sync::Arc<dyn ImageSource>>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("alive", &self.live.is_some())
            .field("cells", &self.cells)
            .finish_non_exhaustive()
    }
}

impl Kernel {
    /// A kernel whose processes start ready to be forked copy-on-write: its seccomp filter
    /// leaves a branch clone to the broker (which holds the listener and refuses every clone
    /// it did not ask for), and its Landlock domain grants files as data beneath its root, so
    /// that a branch's own new `/work` and `/proc` are usable under the domain it inherits
    /// (docs/threat-model.md). Not for a sandbox with a machine (its kernel stays as any).
    #[must_use]
    pub fn forkable() -> Kernel {
        Kernel {
            forkable: true,
            ..Kernel::default()
        }
    }

    /// Fork this (forkable, live) kernel of the sandbox `parent` into `count + 1` branches,
    /// each finished, checked and attested (`fork.rs`); branch 0 is for the parent to go on
    /// with (its filesystem replaces the parent's). This kernel is left without a process: its
    /// state lives on in the branches. [`ForkError::NotForkable`] changes nothing; after
    /// [`ForkError::Failed`] the kernel is gone and its next cell says `kernel_restarted`.
    pub async fn fork(
        &mut self,
        parent: &SandboxFs,
        count: usize,
        executor: &Path,
    ) -> Result<Vec<Branch>, ForkError> {
        if self.unguard().await.is_some() {
            return Err(ForkError::NotForkable(
                "the kernel was ended between cells".into(),
            ));
        }
        match fork::fork(&mut self.live, parent, count, executor).await {
            Ok(forked) => Ok(forked
                .into_iter()
                .map(|f| Branch {
                    fs: f.fs,
                    kernel: Kernel {
                        live: Some(f.live),
                        cells: self.cells,
                        ..Kernel::default()
                    },
                })
                .collect()),
            Err(e @ ForkError::Failed(_)) => {
                self.lost = Some(e.to_string());
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// True while a kernel process holds state.
    #[must_use]
    pub fn alive(&self) -> bool {
        self.live.is_some()
    }

    /// Run one cell: `spec`'s workload must be Python and its sandbox set (the stateful
    /// sandbox's). Starts a kernel first when none is alive; memory, processes and egress are
    /// fixed then, from the cell that starts it, while the timeout is each cell's own. Always
    /// one result; after a result with `kernel_restarted`, no process of the old kernel is left.
    pub async fn run(
        &mut self,
        spec: RunSpec,
        tools: &dyn ToolHandler,
        mut cancel: Cancel,
    ) -> RunResult {
        let started = Instant::now();
        let (code, sandbox) = match (&spec.workload, &spec.sandbox) {
            (Workload::Python { code, .. }, Some(sb)) => (code.as_str(), Arc::clone(sb)),
            _ => {
                let msg = "a kernel runs Python cells in a stateful sandbox";
                return RunResult::not_started(ErrorCode::InvalidParams, msg);
            }
        };
        if !program_fits(code) {
            let msg = format!("program too large: {} bytes", code.len());
            return RunResult::not_started(ErrorCode::ProgramTooLarge, msg);
        }
        let cell = Cell {
            code: code.to_owned(),
            spec: &spec,
        };
        if self
            .live
            .as_ref()
            .is_some_and(|l| !Arc::ptr_eq(&l.launched.sandbox, &sandbox))
        {
            self.shut_down().await;
        }
        // A kernel the guard ended between cells: this cell starts a fresh one, and says so.
        let lost = self.unguard().await.or_else(|| self.lost.take());
        let mut restore = None;
        if self.live.is_none() {
            let image = match self.image.as_deref().map(image::feed).transpose() {
                Ok(image) => image,
                Err(e) => {
                    let msg = format!("the paused kernel's image could not be read: {e}");
                    return RunResult::not_started(ErrorCode::InternalError, msg);
                }
            };
            match start::start(&spec, &mut cancel, started, self.forkable, image).await {
                Ok(live) => self.live = Some(live),
                Err(result) => return result,
            }
            self.image = None;
            restore = self.restore.take();
        }
        let Some(live) = self.live.as_mut() else {
            return RunResult::not_started(ErrorCode::InternalError, "the kernel did not start");
        };
        self.cells += 1;
        let mut outcome = cell::run(
            live,
            self.cells,
            &cell,
            restore,
            tools,
            &mut cancel,
            started,
        )
        .await;
        if outcome.kernel_restarted {
            if let Some(live) = self.live.take() {
                live.end().await;
            }
        } else {
            live.guard = Some(guard::Guard::start(live.procs(), live.limits.memory_bytes));
        }
        // The state this cell may have counted on was gone before it ran.
        outcome.kernel_restarted |= lost.is_some();
        outcome
    }

    /// The kernel's state, for a snapshot: its live scope saved between cells (the kernel
    /// stays), or the state a resumed sandbox has not loaded yet; None when there is none (no
    /// cell ran, or the kernel was ended between cells). The bytes are bounded by twice the
    /// kernel's memory limit. A broken exchange ends the kernel (the next cell says
    /// `kernel_restarted`).
    pub async fn save(
        &mut self,
        spool: &std::path::Path,
    ) -> Result<Option<SavedState>, StateError> {
        self.unguard().await;
        let Some(live) = self.live.as_mut() else {
            return self.pending_state();
        };
        let cap = live.limits.memory_bytes.saturating_mul(2);
        match imaged(live, cap).await {
            Ok(s) => return Ok(Some(s)),
            Err(image::ImageError::NotImageable(why)) => {
                tracing::debug!(reason = %why, "a kernel is pickled instead of imaged");
            }
            Err(image::ImageError::Broken(why)) => {
                self.shut_down().await;
                return Err(StateError::Broken(why));
            }
        }
        let Some(live) = self.live.as_mut() else {
            return Ok(None);
        };
        match state::save(live, cap, spool, SAVE_TIMEOUT).await {
            Ok(s) => Ok(Some(s)),
            Err(e @ (StateError::Refused(_) | StateError::Spool(_))) => Err(e),
            Err(e) => {
                self.shut_down().await;
                Err(e)
            }
        }
    }

    /// Stop watching the stopped kernel (before the broker talks to it); a kernel the guard
    /// ended meanwhile is shut down, and why is returned.
    async fn unguard(&mut self) -> Option<String> {
        let g = self.live.as_mut().and_then(|l| l.guard.take())?;
        let why = g.stop().await?;
        tracing::warn!(reason = %why, "a stateful sandbox's kernel was ended between cells");
        self.shut_down().await;
        Some(why)
    }

    /// A resumed sandbox's state (a file, read from its start): the next kernel that starts
    /// loads it before its first cell.
    pub fn restore_on_start(&mut self, state: std::fs::File) {
        self.restore = Some(state);
    }

    /// A resumed sandbox's kernel image: the next kernel that starts is it.
    pub fn become_on_start(&mut self, image: std::sync::Arc<dyn ImageSource>) {
        self.image = Some(image);
    }

    /// The state a resumed sandbox has not loaded yet, as a snapshot takes it.
    fn pending_state(&self) -> Result<Option<SavedState>, StateError> {
        use std::io::{Seek, SeekFrom};
        if let Some(image) = &self.image {
            let (len, bytes) = image::whole(image.as_ref())?;
            return Ok(Some(SavedState {
                bytes,
                len,
                saved: Vec::new(),
                not_saved: std::collections::BTreeMap::new(),
                carried: "image",
            }));
        }
        let Some(f) = &self.restore else {
            return Ok(None);
        };
        let mut file = f.try_clone()?;
        let len = file.seek(SeekFrom::End(0))?;
        file.seek(SeekFrom::Start(0))?;
        Ok(Some(SavedState {
            bytes: Box::new(file),
            len,
            saved: Vec::new(),
            not_saved: std::collections::BTreeMap::new(),
            carried: "pickle",
        }))
    }

    /// End the kernel (if one is alive) and reap every process of it.
    pub async fn shut_down(&mut self) {
        if let Some(live) = self.live.take() {
            live.end().await;
        }
    }
}

/// The kernel's process image (its facts asked, then read from outside while it stays
/// stopped); it is watched again afterwards.
async fn imaged(live: &mut Live, cap: u64) -> Result<SavedState, image::ImageError> {
    let facts = image::facts(live).await?;
    let procs = live.procs();
    let pid = procs
        .pids()
        .first()
        .copied()
        .ok_or_else(|| image::ImageError::Broken("its process is gone".into()))?;
    let reader =
        tokio::task::spawn_blocking(move || image::capture(pid, &facts, cap).map(|r| (r, facts)))
            .await
            .map_err(|e| image::ImageError::Broken(e.to_string()))?;
    let (reader, facts) = reader?;
    live.guard = Some(guard::Guard::start(procs, live.limits.memory_bytes));
    Ok(SavedState {
        len: reader.len,
        bytes: Box::new(reader),
        saved: facts.saved,
        not_saved: std::collections::BTreeMap::new(),
        carried: "image",
    })
}

/// One branch of a copy-on-write fork: its own filesystem, and a kernel serving cells in it.
#[derive(Debug)]
pub struct Branch {
    /// Its filesystem (a root of its own, a copy of the parent's files).
    pub fs: Arc<SandboxFs>,
    /// Its kernel, holding a copy of the parent's state.
    pub kernel: Kernel,
}

/// How long a kernel gets to save its state.
const SAVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
