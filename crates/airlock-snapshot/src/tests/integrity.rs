//! A snapshot that is not exactly what this store wrote is refused, with a distinct error,
//! before any of it is parsed or restored.
use std::os::unix::fs::{symlink, OpenOptionsExt};
use std::path::Path;

use super::support::*;
use crate::{Bounds, SnapshotError, SnapshotId, Store};

const HEADER_LEN: u64 = crate::format::HEADER_LEN as u64;

/// A store holding one snapshot of a small tree, and that snapshot's id.
fn one() -> (tempfile::TempDir, Store, SnapshotId) {
    let (tmp, store) = store();
    let (src, root) = data_root();
    write_file(&src.path().join("work/a"), &pattern(300_000, 3), 0o644);
    let kernel = pattern(100_000, 4);
    let w = store
        .write(
            b"{}",
            Some(tree(&root)),
            Some(&mut &kernel[..]),
            &Bounds::default(),
        )
        .unwrap();
    (tmp, store, w.info.id)
}

fn flip(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x01], at).unwrap();
}

/// Reading must fail, and a data root must be left as it was (nothing restored).
fn refused(store: &Store, id: &SnapshotId) -> SnapshotError {
    let (dst, _root) = data_root();
    let before = listing(dst.path());
    let e = store.read(id).unwrap_err();
    assert_eq!(listing(dst.path()), before);
    e
}

#[test]
fn one_flipped_byte_in_the_body_is_tampered() {
    let (_t, store, id) = one();
    let path = file_of(&store, &id);
    let len = std::fs::metadata(&path).unwrap().len();
    for at in [HEADER_LEN, HEADER_LEN + 10, len / 2, len - 1] {
        flip(&path, at);
        assert!(
            matches!(refused(&store, &id), SnapshotError::Tampered { .. }),
            "at {at}"
        );
        flip(&path, at);
    }
    store.read(&id).unwrap();
}

#[test]
fn a_cut_file_is_truncated_and_restores_nothing() {
    let (_t, store, id) = one();
    let path = file_of(&store, &id);
    let len = std::fs::metadata(&path).unwrap().len();
    // Shortest last: set_len would extend a file already cut shorter.
    for keep in [len - 1, len / 2, HEADER_LEN + 1, HEADER_LEN, 10, 0] {
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(keep).unwrap();
        let e = refused(&store, &id);
        assert!(
            matches!(e, SnapshotError::Truncated { .. }),
            "cut to {keep}: {e}"
        );
    }
}

#[test]
fn bytes_past_the_body_are_tampered() {
    let (_t, store, id) = one();
    let path = file_of(&store, &id);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"x").unwrap();
    assert!(matches!(
        refused(&store, &id),
        SnapshotError::Tampered { .. }
    ));
}

#[test]
fn another_stores_snapshot_is_foreign() {
    let (_t, store, id) = one();
    let (_t2, other) = super::support::store();
    let there = file_of(&other, &id);
    std::fs::copy(file_of(&store, &id), &there).unwrap();
    chmod(&there, 0o600);
    let e = refused(&other, &id);
    assert!(matches!(e, SnapshotError::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("another key"));
}

#[test]
fn a_flipped_mac_is_foreign() {
    let (_t, store, id) = one();
    flip(&file_of(&store, &id), 30);
    assert!(matches!(
        refused(&store, &id),
        SnapshotError::Foreign { .. }
    ));
}

#[test]
fn a_bad_magic_or_version_is_malformed() {
    let (_t, store, id) = one();
    flip(&file_of(&store, &id), 0);
    assert!(matches!(refused(&store, &id), SnapshotError::Malformed(_)));
    flip(&file_of(&store, &id), 0);
    flip(&file_of(&store, &id), 8);
    assert!(matches!(refused(&store, &id), SnapshotError::Malformed(_)));
}

#[test]
fn a_file_open_to_others_is_foreign() {
    let (_t, store, id) = one();
    chmod(&file_of(&store, &id), 0o644);
    let e = refused(&store, &id);
    assert!(matches!(e, SnapshotError::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("0644"));
}

#[test]
fn a_file_of_another_owner_is_foreign() {
    if !airlock_jail::identity::effective_root() {
        eprintln!("skipped: chown needs root");
        return;
    }
    let (_t, store, id) = one();
    std::os::unix::fs::chown(file_of(&store, &id), Some(65_534), None).unwrap();
    let e = refused(&store, &id);
    assert!(matches!(e, SnapshotError::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("65534"));
}

#[test]
fn a_symlink_in_place_of_a_snapshot_is_not_followed() {
    let (_t, store, id) = one();
    let path = file_of(&store, &id);
    let real = store.dir().join("real");
    std::fs::rename(&path, &real).unwrap();
    symlink(&real, &path).unwrap();
    assert!(matches!(
        refused(&store, &id),
        SnapshotError::Foreign { .. }
    ));
}

#[test]
fn a_missing_snapshot_is_not_found() {
    let (_t, store) = store();
    let id = SnapshotId::parse(&"ab".repeat(32)).unwrap();
    assert!(matches!(store.read(&id), Err(SnapshotError::NotFound(_))));
}

#[test]
fn a_snapshot_renamed_to_another_id_is_tampered() {
    let (_t, store, id) = one();
    let other = SnapshotId::parse(&"0".repeat(64)).unwrap();
    std::fs::rename(file_of(&store, &id), file_of(&store, &other)).unwrap();
    assert!(matches!(
        refused(&store, &other),
        SnapshotError::Tampered { .. }
    ));
}

#[test]
fn a_hand_made_file_in_the_store_is_refused() {
    let (_t, store) = store();
    let id = SnapshotId::parse(&"cd".repeat(32)).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file_of(&store, &id))
        .unwrap();
    std::io::Write::write_all(&mut f, b"AIRLSNAP not really").unwrap();
    let e = refused(&store, &id);
    assert!(
        matches!(
            e,
            SnapshotError::Malformed(_) | SnapshotError::Truncated { .. }
        ),
        "{e}"
    );
}
