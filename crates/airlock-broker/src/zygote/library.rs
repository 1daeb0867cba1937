//! The zygote's native library, `libairlock_zygote.so`: its name and where it is found.
use std::path::{Path, PathBuf};

/// Where `libairlock_zygote.so` is: beside the `airlock` binary (an install), or in its
/// `deps` directory (a cargo build).
pub(super) fn locate(executor: &Path) -> Option<PathBuf> {
    let dir = executor.parent()?;
    [dir.join(LIBRARY), dir.join("deps").join(LIBRARY)]
        .into_iter()
        .find(|p| p.is_file())
}

/// The library's file name.
pub(super) const LIBRARY: &str = "libairlock_zygote.so";
