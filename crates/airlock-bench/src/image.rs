//! The image rows: importing an image once (and again, when its root is already cached), and
//! the cold start of `print(1)` on its root, next to the cold start on the host's root.
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use airlock_broker::{Image, Limits, RunStatus};
use airlock_image::{Bounds, Store};

use crate::airlock::{spec, Echo};

/// An imported image and its store (removed on drop).
pub struct Imported {
    _dir: tempfile::TempDir,
    /// The image.
    pub image: Arc<Image>,
    /// Seconds: the first import, and a second one of the same file (root reused).
    pub seconds: [f64; 2],
    /// What the first import read.
    pub note: String,
}

/// Imports `path` into a fresh store, twice.
pub fn import(path: &Path) -> Result<Imported, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let store = Store::open(dir.path().join("store"));
    let mut seconds = [0.0; 2];
    let mut note = String::new();
    for (i, name) in ["bench", "bench-again"].into_iter().enumerate() {
        let t0 = Instant::now();
        let done = store
            .import(path, name, Bounds::default())
            .map_err(|e| e.to_string())?;
        seconds[i] = t0.elapsed().as_secs_f64();
        if i == 0 {
            let r = &done.record;
            note = format!(
                "{} layer(s), {} entries, {} MB ({})",
                r.layers,
                r.entries,
                r.bytes >> 20,
                r.format
            );
        }
    }
    let image = store.get("bench").map_err(|e| e.to_string())?;
    Ok(Imported {
        _dir: dir,
        image: Arc::new(image),
        seconds,
        note,
    })
}

/// Request-to-result of `print(1)` in a fresh sandbox on `image`; ms.
pub async fn start(
    executor: &Path,
    image: &Arc<Image>,
    runs: usize,
    limits: &Limits,
) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for i in 0..=runs {
        let mut s = spec(executor, "print(1)", limits.clone());
        s.image = Some(Arc::clone(image));
        let t0 = Instant::now();
        let r = airlock_broker::run(s, &Echo).await;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if r.status != RunStatus::Completed || r.stdout != "1\n" {
            let why = r.error.map(|e| e.message).unwrap_or(r.stderr);
            return Err(format!("run ended {}: {why}", r.status.as_str()));
        }
        // The first run probes the image's interpreter (once per image); not a sample.
        if i > 0 {
            out.push(ms);
        }
    }
    Ok(out)
}
