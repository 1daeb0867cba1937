//! Exceeding a bound is an error, never a truncated snapshot, and leaves no file behind; a
//! restore holds to its bounds too.
use super::support::*;
use crate::{Bounds, SnapshotError, Store, MAX_MANIFEST};

fn refused(store: &Store, r: crate::Result<crate::Written>, what: &str) {
    match r {
        Err(SnapshotError::TooLarge { what: w, .. }) => assert_eq!(w, what),
        other => panic!("expected TooLarge({what}), got {other:?}"),
    }
    assert!(store.list().unwrap().is_empty());
    assert!(
        names(&store.dir().join("snapshots")).is_empty(),
        "a file was left"
    );
}

#[test]
fn too_many_bytes() {
    let (_s, store) = store();
    let (src, root) = data_root();
    write_file(&src.path().join("work/a"), &pattern(600_000, 1), 0o644);
    write_file(&src.path().join("work/b"), &pattern(600_000, 2), 0o644);
    let r = store.write(b"", Some(tree(&root)), None, &small_bounds());
    refused(&store, r, "bytes");
}

#[test]
fn too_many_entries() {
    let (_s, store) = store();
    let (src, root) = data_root();
    for i in 0..120 {
        write_file(&src.path().join(format!("tmp/f{i}")), b"", 0o644);
    }
    let r = store.write(b"", Some(tree(&root)), None, &small_bounds());
    refused(&store, r, "entries");
}

#[test]
fn too_deep() {
    let (_s, store) = store();
    let (src, root) = data_root();
    std::fs::create_dir_all(src.path().join("work/1/2/3/4/5")).unwrap();
    let r = store.write(b"", Some(tree(&root)), None, &small_bounds());
    refused(&store, r, "depth");
    std::fs::remove_dir(src.path().join("work/1/2/3/4/5")).unwrap();
    store
        .write(b"", Some(tree(&root)), None, &small_bounds())
        .unwrap();
}

#[test]
fn too_much_kernel_state_or_manifest() {
    let (_s, store) = store();
    let kernel = pattern((1 << 20) + 1, 3);
    let r = store.write(b"", None, Some(&mut &kernel[..]), &small_bounds());
    refused(&store, r, "kernel-state bytes");
    let manifest = vec![b' '; MAX_MANIFEST + 1];
    let r = store.write(&manifest, None, None, &small_bounds());
    refused(&store, r, "manifest bytes");
}

#[test]
fn a_restore_holds_to_its_bounds() {
    let (_s, store) = store();
    let (src, root) = data_root();
    write_file(&src.path().join("work/a"), &pattern(600_000, 1), 0o644);
    let w = store
        .write(b"", Some(tree(&root)), None, &Bounds::default())
        .unwrap();
    let snap = store.read(&w.info.id).unwrap();
    let (_d, droot) = data_root();
    let tight = Bounds {
        max_bytes: 100_000,
        ..Bounds::default()
    };
    let r = snap.restore_into(&droot, &tight);
    assert!(matches!(
        r,
        Err(SnapshotError::TooLarge { what: "bytes", .. })
    ));
    let few = Bounds {
        max_entries: 2,
        ..Bounds::default()
    };
    let r = snap.restore_into(&droot, &few);
    assert!(matches!(
        r,
        Err(SnapshotError::TooLarge {
            what: "entries",
            ..
        })
    ));
    assert!(matches!(snap.kernel_state_bytes(10), Ok(None)));
}

#[test]
fn kernel_state_bytes_honours_its_limit() {
    let (_s, store) = store();
    let kernel = pattern(50_000, 3);
    let w = store
        .write(b"", None, Some(&mut &kernel[..]), &Bounds::default())
        .unwrap();
    let snap = store.read(&w.info.id).unwrap();
    assert!(matches!(
        snap.kernel_state_bytes(49_999),
        Err(SnapshotError::TooLarge { .. })
    ));
    assert_eq!(snap.kernel_state_bytes(50_000).unwrap().unwrap(), kernel);
}
