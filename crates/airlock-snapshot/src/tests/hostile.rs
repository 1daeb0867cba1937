//! Restore treats a body as hostile even after it verified: crafted bodies (published with a
//! valid MAC) cannot write through a link, restore a set-id bit, make a device, FIFO, socket
//! or hard link, or name anything outside the data root. Capture does not follow links and
//! leaves special files out.
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::path::Path;

use super::support::*;
use crate::{Bounds, SnapshotError};

fn restore_crafted(payload: &[u8]) -> (tempfile::TempDir, crate::Result<crate::RestoreInfo>) {
    let (_s, store) = store();
    let id = publish(&store, payload);
    let snap = store.read(&id).unwrap();
    let (dst, root) = data_root();
    let r = snap.restore_into(&root, &Bounds::default());
    (dst, r)
}

/// `work/a -> <outside>` then `work/a/passwd`: the link is replaced by a real directory,
/// nothing is written through it.
#[test]
fn a_crafted_symlink_then_an_entry_beneath_it_does_not_write_through_the_link() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().to_str().unwrap().to_owned();
    let body = Crafted::new()
        .dir("work", 0o755)
        .link("a", &target)
        .dir("a", 0o755)
        .file("passwd", 0o644, b"root::0:0::/:/bin/sh\n")
        .up()
        .up()
        .end();
    let (dst, r) = restore_crafted(&body);
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "outside untouched"
    );
    if r.is_ok() {
        let a = std::fs::symlink_metadata(dst.path().join("work/a")).unwrap();
        assert!(a.is_dir(), "work/a is a real directory now");
        assert!(dst.path().join("work/a/passwd").is_file());
    }
}

/// A link the sandbox planted where the snapshot has a directory is removed, not followed.
#[test]
fn a_planted_link_in_the_data_root_is_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    let body = Crafted::new()
        .dir("work", 0o755)
        .file("x", 0o644, b"x")
        .up()
        .end();
    let (_s, store) = store();
    let snap = store.read(&publish(&store, &body)).unwrap();
    let (dst, root) = data_root();
    std::fs::remove_dir(dst.path().join("work")).unwrap();
    symlink(outside.path(), dst.path().join("work")).unwrap();
    snap.restore_into(&root, &Bounds::default()).unwrap();
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    assert!(std::fs::symlink_metadata(dst.path().join("work"))
        .unwrap()
        .is_dir());
    assert_eq!(std::fs::read(dst.path().join("work/x")).unwrap(), b"x");
}

#[test]
fn set_id_bits_and_file_type_bits_are_never_restored() {
    let body = Crafted::new()
        .dir("work", 0o7777)
        .file("suid", 0o4755, b"x")
        .file("sgid", 0o2777, b"x")
        .file("chr", 0o020_644, b"x")
        .file("sticky", 0o1644, b"x")
        .dir("d", 0o6755)
        .up()
        .up()
        .end();
    let (dst, r) = restore_crafted(&body);
    r.unwrap();
    let m = |p: &str| std::fs::symlink_metadata(dst.path().join(p)).unwrap();
    assert_eq!(m("work").mode() & 0o7777, 0o1777);
    assert_eq!(m("work/suid").mode() & 0o7777, 0o755);
    assert_eq!(m("work/sgid").mode() & 0o7777, 0o777);
    assert_eq!(m("work/chr").mode() & 0o7777, 0o644);
    assert!(m("work/chr").file_type().is_file());
    assert_eq!(m("work/sticky").mode() & 0o7777, 0o644);
    assert_eq!(m("work/d").mode() & 0o7777, 0o755);
}

/// The format has no record for a device, FIFO, socket or hard link: a body that tries one
/// is malformed, and nothing of the kind exists afterwards.
#[test]
fn unknown_record_kinds_such_as_a_device_are_refused() {
    for kind in [b'C', b'B', b'P', b'S', b'H', 0, 0xff] {
        let mut rec = vec![kind, 4];
        rec.extend_from_slice(b"null");
        rec.extend_from_slice(&0o020_666u32.to_le_bytes());
        rec.extend_from_slice(&[1, 3, 0, 0]);
        let body = Crafted::new().dir("work", 0o755).raw(&rec).up().end();
        let (dst, r) = restore_crafted(&body);
        assert!(matches!(r, Err(SnapshotError::Malformed(_))), "kind {kind}");
        let p = dst.path().join("work/null");
        assert!(
            std::fs::symlink_metadata(&p).is_err(),
            "kind {kind} made something"
        );
    }
}

#[test]
fn names_that_are_not_one_segment_are_refused() {
    for name in ["..", ".", "a/b", "/etc"] {
        let mut rec = vec![b'F', u8::try_from(name.len()).unwrap()];
        rec.extend_from_slice(name.as_bytes());
        let body = Crafted::new().dir("work", 0o755).raw(&rec).end();
        let (_d, r) = restore_crafted(&body);
        assert!(matches!(r, Err(SnapshotError::Malformed(_))), "{name:?}");
    }
    let mut dotdot = vec![b'D', 2, b'.', b'.'];
    dotdot.extend_from_slice(&[0; 16]);
    let body = Crafted::new().raw(&dotdot).up().end();
    assert!(matches!(
        restore_crafted(&body).1,
        Err(SnapshotError::Malformed(_))
    ));
}

#[test]
fn top_level_files_and_unbalanced_trees_are_malformed() {
    let bodies = [
        Crafted::new().file("x", 0o644, b"x").end(),
        Crafted::new().link("x", "/").end(),
        Crafted::new().up().end(),
        Crafted::new().dir("work", 0o755).end(),
        Crafted::new()
            .dir("work", 0o755)
            .up()
            .raw(b"E")
            .raw(&[9; 16])
            .raw(b"x")
            .bytes,
    ];
    for body in bodies {
        assert!(matches!(
            restore_crafted(&body).1,
            Err(SnapshotError::Malformed(_))
        ));
    }
}

/// Existing names: a file or link in the way is replaced; a directory is restored into.
#[test]
fn existing_names_are_replaced_and_directories_merged() {
    let (_s, store) = store();
    let body = Crafted::new()
        .dir("work", 0o755)
        .file("f", 0o644, b"new")
        .link("l", "new-target")
        .file("was-dir", 0o644, b"file now")
        .dir("d", 0o755)
        .file("in-d", 0o644, b"x")
        .up()
        .up()
        .end();
    let snap = store.read(&publish(&store, &body)).unwrap();
    let (dst, root) = data_root();
    let w = dst.path().join("work");
    write_file(&w.join("f"), b"old", 0o600);
    symlink("old-target", w.join("l")).unwrap();
    std::fs::create_dir_all(w.join("was-dir/sub")).unwrap();
    std::fs::create_dir(w.join("d")).unwrap();
    write_file(&w.join("d/kept"), b"k", 0o644);
    let info = snap.restore_into(&root, &Bounds::default()).unwrap();
    assert_eq!(info.replaced, 3);
    assert_eq!(std::fs::read(w.join("f")).unwrap(), b"new");
    assert_eq!(
        std::fs::read_link(w.join("l")).unwrap(),
        Path::new("new-target")
    );
    assert_eq!(std::fs::read(w.join("was-dir")).unwrap(), b"file now");
    assert_eq!(std::fs::read(w.join("d/kept")).unwrap(), b"k");
    assert_eq!(std::fs::read(w.join("d/in-d")).unwrap(), b"x");
}

/// Capture: a link to a directory outside is stored as a link (nothing of the outside is
/// taken); FIFOs and sockets are left out and counted; a file linked twice is stored twice
/// and restored as two files.
#[test]
fn capture_takes_links_as_links_and_skips_special_files() {
    let outside = tempfile::tempdir().unwrap();
    write_file(&outside.path().join("secret"), b"secret", 0o644);
    let (src, root) = data_root();
    let w = src.path().join("work");
    symlink(outside.path(), w.join("out")).unwrap();
    write_file(&w.join("one"), b"hard", 0o644);
    std::fs::hard_link(w.join("one"), w.join("two")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(w.join("fifo"))
        .status();
    let _sock = std::os::unix::net::UnixListener::bind(w.join("sock")).unwrap();
    let fifos = u64::from(fifo.is_ok_and(|s| s.success()));

    let (_s, store) = store();
    let wr = store
        .write(b"", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    assert_eq!(wr.captured.skipped, 1 + fifos);
    assert_eq!((wr.captured.files, wr.captured.symlinks), (2, 1));
    let (dst, droot) = data_root();
    store
        .read(&wr.info.id)
        .unwrap()
        .restore_into(&droot, &Bounds::default())
        .unwrap();
    let d = dst.path().join("work");
    assert!(std::fs::symlink_metadata(d.join("out"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!d.join("secret").exists());
    assert_eq!(std::fs::metadata(d.join("one")).unwrap().nlink(), 1);
    assert_eq!(std::fs::read(d.join("two")).unwrap(), b"hard");
    for special in ["fifo", "sock"] {
        let m = std::fs::symlink_metadata(d.join(special));
        assert!(m.is_err(), "{special} was restored");
    }
    let ft = std::fs::symlink_metadata(w.join("sock"))
        .unwrap()
        .file_type();
    assert!(ft.is_socket());
}
