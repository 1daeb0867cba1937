//! A stateful sandbox's copy-on-write fork (issue 27): its kernel is cloned into branches
//! (`airlock_broker::kernel`'s fork), the sandbox itself goes on as branch 0 (its filesystem
//! and kernel replaced by that branch's), and each other branch is made a sandbox of its own
//! by an acquire from it (`Origin::Branch`, see [`crate::backend`]).
use std::sync::Arc;

use airlock_broker::kernel::{Branch, ForkError};

use crate::sandbox::LocalSandbox;

impl LocalSandbox {
    /// Fork this sandbox's kernel into `count` branches besides itself; the caller gives each
    /// to a new sandbox (an acquire with `Origin::Branch`). [`ForkError::NotForkable`] leaves
    /// everything as it was (a copy can be made instead).
    pub async fn fork_kernel(&self, count: usize) -> Result<Vec<Branch>, ForkError> {
        let not = |why: &str| ForkError::NotForkable(why.into());
        let mut kernel = self.run_lock.lock().await;
        let k = kernel
            .as_mut()
            .ok_or_else(|| not("the sandbox is not stateful"))?;
        let fs = self
            .root
            .current()
            .ok_or_else(|| not("the sandbox has no root yet"))?;
        let mut branches = k.fork(&fs, count, &self.config.executor).await?;
        if branches.is_empty() {
            return Err(ForkError::Failed(
                "no branch came back for the sandbox itself".into(),
            ));
        }
        let own = branches.remove(0);
        if !self.root.replace(Arc::clone(&own.fs)) {
            return Err(ForkError::Failed(
                "the sandbox was disposed during its fork".into(),
            ));
        }
        *k = own.kernel;
        Ok(branches)
    }
}
