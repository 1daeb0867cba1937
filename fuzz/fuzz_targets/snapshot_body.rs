//! Snapshot bodies are verified before they are parsed, but restore treats them as hostile
//! anyway: any bytes through airlock-snapshot's block decoder, payload parser and restore
//! (selector 0: a body of framed blocks, read for its kernel state then restored; 1: a raw
//! payload, straight to the record parser), into a fresh data root, with small bounds. The
//! oracles: an error or a restore, never a panic; nothing outside the data root; beneath it
//! only directories, regular files and symlinks, no set-id bit, no hard link, within the
//! bounds.
#![no_main]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use airlock_jail::dirfd::DirFd;
use airlock_snapshot::fuzzing::{read_body, restore_body, restore_payload_bytes};
use airlock_snapshot::Bounds;
use libfuzzer_sys::fuzz_target;

const BOUNDS: Bounds = Bounds {
    max_bytes: 1 << 20,
    max_entries: 256,
    max_depth: 8,
    max_kernel_bytes: 1 << 20,
};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("root");
    let outside = base.path().join("outside");
    for d in ["root", "root/work", "root/tmp", "root/shm", "outside"] {
        std::fs::create_dir(base.path().join(d)).unwrap();
    }
    let fd = DirFd::open(&root).unwrap();
    let restored = if selector % 2 == 0 {
        let _ = read_body(rest);
        restore_body(rest, &fd, &BOUNDS)
    } else {
        restore_payload_bytes(rest, &fd, &BOUNDS)
    };
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "wrote outside"
    );
    let mut seen = (0u64, 0u64);
    check(&root, 0, &mut seen);
    if let Ok(info) = restored {
        assert!(info.bytes <= BOUNDS.max_bytes);
        assert!(info.dirs + info.files + info.symlinks <= BOUNDS.max_entries);
    }
    let entries = [seen.0 <= BOUNDS.max_entries + 3, seen.1 <= BOUNDS.max_bytes];
    assert!(entries.iter().all(|&ok| ok), "past the bounds: {seen:?}");
});

/// Walks the restored tree without following links, checking every entry; makes each
/// directory writable again so the temporary directory can go.
fn check(dir: &Path, depth: u32, seen: &mut (u64, u64)) {
    assert!(depth <= BOUNDS.max_depth + 2, "too deep");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let ft = m.file_type();
        seen.0 += 1;
        if ft.is_dir() {
            assert_eq!(m.mode() & 0o6000, 0, "set-id directory {p:?}");
            check(&p, depth + 1, seen);
        } else if ft.is_file() {
            assert_eq!(m.mode() & 0o7000, 0, "set-id or sticky file {p:?}");
            assert_eq!(m.nlink(), 1, "hard link {p:?}");
            seen.1 += m.len();
        } else {
            assert!(ft.is_symlink(), "special file {p:?}");
        }
    }
}
