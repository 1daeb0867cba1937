//! A sandbox's root and filesystem ([`SandboxFs`]): made when the sandbox is made, or — for a
//! call-scoped sandbox — only when something needs it.
//!
//! A call-scoped sandbox often serves exactly one run (`execute`, an MCP tool call in call
//! scope) and is disposed right after. Such a run's stage builds the root itself, in the same
//! way ([`airlock_broker::run`] with no sandbox): one process fewer before the program starts.
//! Anything else — a file operation, or a run that is not the sandbox's last — makes the root
//! first, so files persist across the sandbox's life exactly as for any sandbox.
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use airlock_broker::{Image, RootSpec, SandboxFs};

use crate::config::LocalConfig;

/// Where a sandbox's root stands.
#[derive(Debug)]
pub(crate) enum Root {
    /// Not made yet (the sandbox's image, if it has one, is known).
    Unmade {
        /// The image its root comes from.
        image: Option<Arc<Image>>,
    },
    /// Made: every run joins it, every file operation resolves in it.
    Made(Arc<SandboxFs>),
    /// Disposed: nothing is left and nothing more is made.
    Gone,
}

/// What a run should do about the root.
pub(crate) enum ForRun {
    /// Join this filesystem.
    Join(Arc<SandboxFs>),
    /// Let the run's stage build its own root (from this image, if any).
    Own(Option<Arc<Image>>),
}

/// A sandbox's root, made at most once.
#[derive(Debug)]
pub(crate) struct RootCell {
    root: Mutex<Root>,
    /// The sandbox has a machine (background processes, ports): its root is never a run's own.
    machine: bool,
    /// Held while the root is being made, so it is made once.
    making: tokio::sync::Mutex<()>,
}

impl RootCell {
    pub(crate) fn new(root: Root, machine: bool) -> Self {
        RootCell {
            root: Mutex::new(root),
            machine,
            making: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Root> {
        self.root.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the root is (or will be) an image's.
    pub(crate) fn on_image(&self) -> bool {
        match &*self.lock() {
            Root::Unmade { image } => image.is_some(),
            Root::Made(fs) => fs.image().is_some(),
            Root::Gone => false,
        }
    }

    /// The filesystem if it is made (nothing is made here).
    pub(crate) fn current(&self) -> Option<Arc<SandboxFs>> {
        match &*self.lock() {
            Root::Made(fs) => Some(Arc::clone(fs)),
            Root::Unmade { .. } | Root::Gone => None,
        }
    }

    /// The filesystem, made now if it was not; Err once disposed or when it cannot be made.
    pub(crate) async fn made(&self, config: &LocalConfig) -> Result<Arc<SandboxFs>, String> {
        let _making = self.making.lock().await;
        let image = match &*self.lock() {
            Root::Made(fs) => return Ok(Arc::clone(fs)),
            Root::Gone => return Err("the sandbox was disposed".into()),
            Root::Unmade { image } => image.clone(),
        };
        let fs = Arc::new(new_fs(config, image).await?);
        let mut root = self.lock();
        if matches!(*root, Root::Gone) {
            return Err("the sandbox was disposed".into());
        }
        *root = Root::Made(Arc::clone(&fs));
        Ok(fs)
    }

    /// What a run does about the root: join it, or — when the root is not made and this run
    /// is the sandbox's `last` — build its own.
    pub(crate) async fn for_run(&self, config: &LocalConfig, last: bool) -> Result<ForRun, String> {
        if last && !self.machine {
            if let Root::Unmade { image } = &*self.lock() {
                return Ok(ForRun::Own(image.clone()));
            }
        }
        self.made(config).await.map(ForRun::Join)
    }

    /// Put `fs` in place of the root (a fork's branch's own); false once disposed.
    pub(crate) fn replace(&self, fs: Arc<SandboxFs>) -> bool {
        let mut root = self.lock();
        if matches!(*root, Root::Gone) {
            return false;
        }
        *root = Root::Made(fs);
        true
    }

    /// Drop the root (everything the sandbox wrote goes with it); nothing is made after this.
    pub(crate) fn take(&self) -> Root {
        std::mem::replace(&mut *self.lock(), Root::Gone)
    }
}

/// A fresh sandbox filesystem for `config`: the image's root, or the system root with the
/// interpreter's tree (when one is found); and the disk bound of its limits.
pub(crate) async fn new_fs(
    config: &LocalConfig,
    image: Option<Arc<Image>>,
) -> Result<SandboxFs, String> {
    let data = airlock_broker::DataBounds {
        bytes: config.limits.max_disk_bytes,
        inodes: config.limits.max_disk_entries,
    };
    let root = match image {
        Some(image) => RootSpec::of_image(image, data),
        None => {
            let interp = airlock_broker::interpreter::discover(config.python.as_deref())
                .await
                .ok();
            RootSpec {
                binds: airlock_broker::fs_policy::root_binds(interp.as_ref(), &[]),
                data,
                image: None,
            }
        }
    };
    SandboxFs::create(&config.executor, root)
        .await
        .map_err(|e| e.to_string())
}
