//! A fresh probe directory in a sandbox's work dir, removed after the probe.
use airlock_policy::GuestRelPath;

use crate::sandbox::Sandbox;

/// A fresh probe directory (relative to the work dir) and a path inside it.
pub(crate) struct Scratch {
    pub(crate) dir: GuestRelPath,
}

impl Scratch {
    pub(crate) fn new() -> Result<Scratch, String> {
        let id = crate::ids::fresh_id().map_err(|e| format!("no entropy: {e}"))?;
        let dir = GuestRelPath::parse(&format!("conformance-{id}")).map_err(|e| e.to_string())?;
        Ok(Scratch { dir })
    }

    pub(crate) fn path(&self, rel: &str) -> Result<GuestRelPath, String> {
        let child = GuestRelPath::parse(rel).map_err(|e| e.to_string())?;
        Ok(self.dir.join(&child))
    }

    pub(crate) async fn cleanup(&self, sandbox: &dyn Sandbox, work_dir: &str) {
        let _ = sandbox
            .reclaim(work_dir, &self.dir, std::time::Duration::from_secs(10))
            .await;
    }
}
