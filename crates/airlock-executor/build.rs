//! Fingerprints the stage's sources (this crate's and airlock-jail's) into
//! `AIRLOCK_STAGE_BUILD`: a zygote library and a broker built from different sources refuse
//! to work together (crate::zygote::build), whatever their protocol version says.
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dirs = [manifest.join("src"), manifest.join("../airlock-jail/src")];
    let mut all = Vec::new();
    for dir in &dirs {
        println!("cargo:rerun-if-changed={}", dir.display());
        files(dir, &mut all);
    }
    all.sort();
    let mut hasher = DefaultHasher::new();
    for path in &all {
        path.strip_prefix(&manifest)
            .unwrap_or(path)
            .hash(&mut hasher);
        std::fs::read(path).unwrap_or_default().hash(&mut hasher);
    }
    // Positive and within an i64, so it survives a C `long` and Python's int unchanged.
    let build = hasher.finish() >> 1;
    println!("cargo:rustc-env=AIRLOCK_STAGE_BUILD={build}");
}
