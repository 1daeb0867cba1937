//! The store's own files: permissions, refusals of unsafe stores, the key, and the sweep of
//! what killed writers left.
use std::os::unix::fs::{symlink, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::support::*;
use crate::{Bounds, SnapshotError, Store};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn unsafe_store(dir: &Path, needle: &str) {
    match Store::open(dir) {
        Err(e @ SnapshotError::UnsafeStore { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
        }
        other => panic!("expected an unsafe-store refusal, got {other:?}"),
    }
}

#[test]
fn a_new_store_is_closed_to_everyone_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/state");
    let store = Store::open(&dir).unwrap();
    let w = store.write(b"x", None, None, &Bounds::default()).unwrap();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(
        mode(&tmp.path().join("a")),
        0o700,
        "parents are made 0700 too"
    );
    assert_eq!(mode(&dir.join("snapshots")), 0o700);
    assert_eq!(mode(&dir.join("key")), 0o600);
    assert_eq!(std::fs::metadata(dir.join("key")).unwrap().len(), 32);
    assert_eq!(mode(&file_of(&store, &w.info.id)), 0o600);
    assert_eq!(names(&dir), ["key", "snapshots"]);
}

#[test]
fn a_store_is_reopened_with_its_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let w = Store::open(&dir)
        .unwrap()
        .write(b"x", None, None, &Bounds::default())
        .unwrap();
    let key = std::fs::read(dir.join("key")).unwrap();
    let again = Store::open(&dir).unwrap();
    assert_eq!(std::fs::read(dir.join("key")).unwrap(), key);
    assert_eq!(again.read(&w.info.id).unwrap().manifest(), b"x");
}

#[test]
fn servers_racing_to_make_a_store_end_with_one_key() {
    for _ in 0..20 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let stores: Vec<Store> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| Store::open(&dir).unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let w = stores[0]
            .write(b"k", None, None, &Bounds::default())
            .unwrap();
        for s in &stores {
            s.read(&w.info.id).unwrap();
        }
        assert_eq!(names(&dir), ["key", "snapshots"], "no temporary key left");
    }
}

#[test]
fn a_store_open_to_group_or_others_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    Store::open(&dir).unwrap();
    chmod(&dir, 0o750);
    unsafe_store(&dir, "mode 0750");
    chmod(&dir, 0o700);
    chmod(&dir.join("snapshots"), 0o701);
    unsafe_store(&dir, "open to group or others");
    chmod(&dir.join("snapshots"), 0o700);
    chmod(&dir.join("key"), 0o640);
    unsafe_store(&dir, "key");
    chmod(&dir.join("key"), 0o600);
    Store::open(&dir).unwrap();
}

#[test]
fn symlinks_in_the_store_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    Store::open(&real).unwrap();
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    unsafe_store(&link, "symbolic link");

    let dir = tmp.path().join("state");
    Store::open(&dir).unwrap();
    std::fs::rename(dir.join("snapshots"), tmp.path().join("elsewhere")).unwrap();
    symlink(tmp.path().join("elsewhere"), dir.join("snapshots")).unwrap();
    unsafe_store(&dir, "symbolic link");

    let dir2 = tmp.path().join("state2");
    Store::open(&dir2).unwrap();
    std::fs::rename(dir2.join("key"), tmp.path().join("key-elsewhere")).unwrap();
    symlink(tmp.path().join("key-elsewhere"), dir2.join("key")).unwrap();
    unsafe_store(&dir2, "symbolic link");
}

#[test]
fn a_key_of_the_wrong_size_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    Store::open(&dir).unwrap();
    std::fs::write(dir.join("key"), [1u8; 31]).unwrap();
    unsafe_store(&dir, "31 bytes");
}

#[test]
fn a_store_of_another_owner_is_refused() {
    if !airlock_jail::identity::effective_root() {
        eprintln!("skipped: chown needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    Store::open(&dir).unwrap();
    std::os::unix::fs::chown(dir.join("key"), Some(65_534), None).unwrap();
    unsafe_store(&dir, "owned by uid 65534");
    std::os::unix::fs::chown(dir.join("key"), Some(0), None).unwrap();
    std::os::unix::fs::chown(&dir, Some(65_534), None).unwrap();
    unsafe_store(&dir, "owned by uid 65534");
}

/// A `.tmp-*` a killed writer left is never listed or read, and the next open removes it;
/// one a live writer holds (locked) is left alone.
#[test]
fn leftovers_of_a_killed_writer_are_swept_and_never_listed() {
    let (_t, store) = store();
    let snaps = store.dir().join("snapshots");
    let w = store.write(b"x", None, None, &Bounds::default()).unwrap();
    std::fs::copy(
        file_of(&store, &w.info.id),
        snaps.join(".tmp-0123456789abcdef"),
    )
    .unwrap();
    std::fs::write(store.dir().join(".tmp-feedfacefeedface"), b"half a key").unwrap();
    let live = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(snaps.join(".tmp-1111111111111111"))
        .unwrap();
    live.lock().unwrap();
    let ids: Vec<_> = store.list().unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(ids, vec![w.info.id.clone()]);
    assert!(crate::SnapshotId::parse(".tmp-0123456789abcdef").is_err());

    let again = Store::open(store.dir()).unwrap();
    assert_eq!(names(&snaps), [".tmp-1111111111111111", w.info.id.as_str()]);
    assert_eq!(names(again.dir()), ["key", "snapshots"]);
    drop(live);
    Store::open(store.dir()).unwrap();
    assert_eq!(names(&snaps), [w.info.id.as_str()]);
}
