//! What is written is what comes back: files, modes, mtimes, links, empty directories, the
//! sticky tmp, a kernel blob of several MB, the manifest; same content, same id.
use std::io::Read;
use std::os::unix::fs::{symlink, MetadataExt};

use super::support::*;
use crate::{Bounds, Captured};

/// A data root with a bit of everything.
fn populated() -> (tempfile::TempDir, airlock_jail::dirfd::DirFd) {
    let (tmp, root) = data_root();
    let p = tmp.path();
    std::fs::create_dir_all(p.join("work/src/pkg")).unwrap();
    std::fs::create_dir(p.join("work/empty")).unwrap();
    write_file(
        &p.join("work/src/pkg/mod.py"),
        b"def f():\n    return 42\n",
        0o644,
    );
    write_file(&p.join("work/run.sh"), b"#!/bin/sh\necho hi\n", 0o750);
    write_file(&p.join("work/empty.txt"), b"", 0o600);
    let big = pattern(3_000_000, 1);
    write_file(&p.join("work/big.bin"), &big, 0o640);
    symlink("src/pkg/mod.py", p.join("work/link")).unwrap();
    symlink("/etc/passwd", p.join("work/abs-link")).unwrap();
    symlink("nowhere", p.join("work/dangling")).unwrap();
    write_file(&p.join("tmp/t.txt"), b"tmp file", 0o644);
    write_file(&p.join("shm/seg"), &[0u8; 4096], 0o600);
    chmod(&p.join("work/empty"), 0o500);
    set_mtime(&p.join("work/src/pkg/mod.py"), 1_600_000_000, 123_456_789);
    set_mtime(&p.join("work/src"), 1_500_000_000, 5);
    set_mtime(&p.join("work/empty"), 1_400_000_000, 0);
    (tmp, root)
}

#[test]
fn a_tree_kernel_state_and_manifest_round_trip() {
    let (_s, store) = store();
    let (src, root) = populated();
    let kernel = pattern(5_000_000, 2);
    let manifest = br#"{"python":"3.11","cells":3}"#;
    let w = store
        .write(
            manifest,
            Some(tree(&root)),
            Some(&mut &kernel[..]),
            &Bounds::default(),
        )
        .unwrap();
    assert!(!w.reused);
    assert_eq!(
        w.captured,
        Captured {
            dirs: 6,
            files: 6,
            symlinks: 3,
            skipped: 0,
            vanished: 0,
            bytes: w.captured.bytes,
            kernel_bytes: kernel.len() as u64
        }
    );

    let snap = store.read(&w.info.id).unwrap();
    assert_eq!(snap.id(), &w.info.id);
    assert_eq!(snap.manifest(), manifest);
    assert!(snap.has_kernel_state());
    assert_eq!(snap.kernel_state_bytes(u64::MAX).unwrap().unwrap(), kernel);
    let mut streamed = Vec::new();
    snap.kernel_state()
        .unwrap()
        .unwrap()
        .read_to_end(&mut streamed)
        .unwrap();
    assert!(streamed == kernel);

    let (dst, dst_root) = data_root();
    let info = snap.restore_into(&dst_root, &Bounds::default()).unwrap();
    assert_eq!((info.dirs, info.files, info.symlinks), (6, 6, 3));
    assert_eq!(listing(dst.path()), listing(src.path()));
    let tmp_mode = std::fs::metadata(dst.path().join("tmp")).unwrap().mode() & 0o7777;
    assert_eq!(tmp_mode, 0o1777, "the sticky bit of tmp is kept");
}

#[test]
fn no_tree_and_no_kernel_state() {
    let (_s, store) = store();
    let w = store.write(b"", None, None, &Bounds::default()).unwrap();
    let snap = store.read(&w.info.id).unwrap();
    assert!(snap.manifest().is_empty());
    assert!(!snap.has_kernel_state());
    assert!(snap.kernel_state().unwrap().is_none());
    let (dst, dst_root) = data_root();
    let before = listing(dst.path());
    assert_eq!(
        snap.restore_into(&dst_root, &Bounds::default())
            .unwrap()
            .dirs,
        0
    );
    assert_eq!(listing(dst.path()), before);
}

#[test]
fn same_content_same_id_and_the_existing_file_is_kept() {
    let (_s, store) = store();
    let (_src, root) = populated();
    let a = store
        .write(b"m", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    let path = file_of(&store, &a.info.id);
    let ino = std::fs::metadata(&path).unwrap().ino();
    let b = store
        .write(b"m", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    assert_eq!(a.info.id, b.info.id);
    assert!(b.reused);
    assert_eq!(
        std::fs::metadata(&path).unwrap().ino(),
        ino,
        "the first file was kept"
    );
    let c = store
        .write(b"other", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    assert_ne!(a.info.id, c.info.id);
    assert_eq!(store.list().unwrap().len(), 2);
}

#[test]
fn the_id_does_not_depend_on_the_thread_count() {
    let (_s, mut store) = store();
    let (_src, root) = populated();
    store.threads = 1;
    let one = store
        .write(b"m", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    store.remove(&one.info.id).unwrap();
    store.threads = 3;
    let three = store
        .write(b"m", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    assert_eq!(one.info.id, three.info.id);
    assert!(!three.reused);
}

#[test]
fn list_and_remove() {
    let (_s, store) = store();
    let a = store.write(b"a", None, None, &Bounds::default()).unwrap();
    let b = store.write(b"b", None, None, &Bounds::default()).unwrap();
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 2);
    let size = std::fs::metadata(file_of(&store, &a.info.id))
        .unwrap()
        .len();
    let la = listed.iter().find(|i| i.id == a.info.id).unwrap();
    assert_eq!(la.stored_bytes, size);
    assert!(la.created.elapsed().unwrap().as_secs() < 60);
    store.remove(&a.info.id).unwrap();
    assert!(matches!(
        store.remove(&a.info.id),
        Err(crate::SnapshotError::NotFound(_))
    ));
    assert!(matches!(
        store.read(&a.info.id),
        Err(crate::SnapshotError::NotFound(_))
    ));
    let ids: Vec<_> = store.list().unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(ids, vec![b.info.id]);
}

/// A file appended to while snapshots are taken: every snapshot reads back and restores, its
/// framing exact whatever size the file had.
#[test]
fn a_file_growing_during_capture_still_gives_consistent_snapshots() {
    let (_s, store) = store();
    let (src, root) = data_root();
    let path = src.path().join("work/log");
    write_file(&path, b"", 0o644);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                f.write_all(&[b'x'; 4099]).unwrap();
                f.set_len(f.metadata().unwrap().len() % 3_000_000).unwrap();
            }
        });
        for _ in 0..20 {
            let w = store
                .write(b"", Some(tree(&root)), None, &Bounds::default())
                .unwrap();
            let (dst, dst_root) = data_root();
            store
                .read(&w.info.id)
                .unwrap()
                .restore_into(&dst_root, &Bounds::default())
                .unwrap();
            let got = std::fs::read(dst.path().join("work/log")).unwrap();
            assert!(got.iter().all(|&b| b == b'x' || b == 0));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// A sparse file comes back sparse: its zero chunks are holes, so a sandbox whose disk held
/// it holds it again (64 MiB apparent, a few KiB of data).
#[test]
fn a_sparse_file_is_restored_sparse() {
    let (_s, store) = store();
    let (src, root) = data_root();
    let path = src.path().join("work/sparse");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(64 << 20).unwrap();
    drop(f);
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(32 << 20)).unwrap();
        f.write_all(&pattern(4096, 7)).unwrap();
    }
    let want = std::fs::read(&path).unwrap();
    let w = store
        .write(b"{}", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    let (dst, dst_root) = data_root();
    let snap = store.read(&w.info.id).unwrap();
    snap.restore_into(&dst_root, &Bounds::default()).unwrap();
    let back = dst.path().join("work/sparse");
    assert_eq!(std::fs::read(&back).unwrap(), want);
    let m = std::fs::metadata(&back).unwrap();
    assert_eq!(m.len(), 64 << 20);
    assert!(
        m.blocks() * 512 < 1 << 20,
        "{} bytes on disk",
        m.blocks() * 512
    );
}
