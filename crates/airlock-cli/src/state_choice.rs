//! Which state directory `airlock serve` keeps snapshots and paused sandboxes in.
use std::path::PathBuf;
use std::sync::Arc;

use airlock_server::state_dir::StateDir;
use anyhow::Context;

/// The default: `$AIRLOCK_STATE_DIR`, `/var/lib/airlock/state` as root, else
/// `$XDG_STATE_HOME/airlock` or `~/.local/state/airlock`.
fn default_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("AIRLOCK_STATE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if airlock_jail::identity::effective_root() {
        return Some(PathBuf::from("/var/lib/airlock/state"));
    }
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(x).join("airlock"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|h| PathBuf::from(h).join(".local/state/airlock"))
}

/// Open the named state directory (an error if it cannot be), or the default (without one,
/// the server keeps no snapshots and says so).
pub fn open(named: Option<PathBuf>, max_bytes: u64) -> anyhow::Result<Option<Arc<StateDir>>> {
    if let Some(dir) = named {
        let s = StateDir::open(&dir).with_context(|| format!("--state-dir {}", dir.display()))?;
        return Ok(Some(Arc::new(s.with_max_bytes(max_bytes))));
    }
    let Some(dir) = default_dir() else {
        tracing::warn!("no state directory (HOME is unset): snapshots and pause are off");
        return Ok(None);
    };
    match StateDir::open(&dir) {
        Ok(s) => Ok(Some(Arc::new(s.with_max_bytes(max_bytes)))),
        Err(e) => {
            tracing::warn!(error = %e, "snapshots and pause are off");
            Ok(None)
        }
    }
}
