//! Measures a snapshot end to end: write (walk, compress, hash, write, fsync), read (verify),
//! restore.
//!
//! ```sh
//! cargo run --release -p airlock-snapshot --example throughput -- \
//!     DATA_ROOT DIRS [KERNEL_STATE_FILE] [STATE_DIR] [THREADS]
//! ```
//! `DIRS` is comma-separated (`work,tmp,shm`); the store goes in `STATE_DIR` (default: a
//! temporary directory) and the restore beneath a fresh temporary data root.
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use airlock_jail::dirfd::DirFd;
use airlock_snapshot::{Bounds, Store, Tree};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, dirs, rest @ ..] = &args[..] else {
        return Err(
            "usage: throughput DATA_ROOT DIRS [KERNEL_STATE_FILE] [STATE_DIR] [THREADS]".into(),
        );
    };
    let scratch = std::env::temp_dir().join(format!("snapshot-bench-{}", std::process::id()));
    let state = rest
        .get(1)
        .map_or_else(|| scratch.join("state"), PathBuf::from);
    let mut store = Store::open(&state)?;
    if let Some(n) = rest.get(2) {
        store.set_compression_threads(n.parse()?);
    }
    let root = DirFd::open(std::path::Path::new(root))?;
    let dirs: Vec<&str> = dirs.split(',').collect();
    let mut kernel = rest.first().map(File::open).transpose()?;
    let bounds = Bounds::default();

    let t = Instant::now();
    let tree = Tree {
        root: &root,
        dirs: &dirs,
    };
    let w = store.write(
        b"{}",
        Some(tree),
        kernel.as_mut().map(|k| k as &mut dyn Read),
        &bounds,
    )?;
    let secs = t.elapsed().as_secs_f64();
    let raw = w.captured.bytes + w.captured.kernel_bytes;
    let mb = raw as f64 / 1e6;
    println!(
        "write:   {mb:.0} MB ({} files) -> {:.0} MB stored in {secs:.3} s = {:.0} MB/s",
        w.captured.files,
        w.info.stored_bytes as f64 / 1e6,
        mb / secs
    );

    let t = Instant::now();
    let snap = store.read(&w.info.id)?;
    let secs = t.elapsed().as_secs_f64();
    println!("verify:  {secs:.3} s = {:.0} MB/s of payload", mb / secs);

    let target = scratch.join("restore");
    std::fs::create_dir_all(&target)?;
    let troot = DirFd::open(&target)?;
    let t = Instant::now();
    let info = snap.restore_into(&troot, &bounds)?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "restore: {} files in {secs:.3} s = {:.0} MB/s of payload",
        info.files,
        mb / secs
    );
    std::fs::remove_dir_all(&scratch).ok();
    Ok(())
}
