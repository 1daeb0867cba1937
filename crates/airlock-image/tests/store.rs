//! The store's own bookkeeping: a name's old root goes with it, and a store with links planted
//! in it is refused before anything is written through them. (The same attacks against the
//! real binary, as root and as an unprivileged user, are in airlock-cli's `images_all` suite.)
#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;

use airlock_image::bounds::Bounds;
use airlock_image::tar::header::{encode, BLOCK};
use airlock_image::{ImageError, Store};

/// A root tarball holding one file `name` with `body`.
fn root_tar(at: &Path, name: &str, body: &[u8]) -> std::path::PathBuf {
    let mut v = encode(b'0', name.as_bytes(), b"", 0o644, body.len() as u64).to_vec();
    v.extend_from_slice(body);
    v.resize(v.len().div_ceil(BLOCK) * BLOCK + 2 * BLOCK, 0);
    let p = at.join(format!("{name}.tar"));
    std::fs::write(&p, v).unwrap();
    p
}

fn roots(store: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(store.join("roots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn replacing_a_name_removes_the_root_it_named_unless_another_name_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        root_tar(dir.path(), "a", b"a"),
        root_tar(dir.path(), "b", b"b"),
    );
    let store = Store::open(dir.path().join("store"));
    let first = store.import(&a, "x", Bounds::default()).unwrap().record.id;
    store.import(&a, "keep", Bounds::default()).unwrap();
    let second = store.import(&b, "x", Bounds::default()).unwrap().record.id;
    // `keep` still names the first root.
    assert_eq!(roots(store.dir()), {
        let mut v = vec![first.clone(), second.clone()];
        v.sort();
        v
    });
    assert!(store.remove("keep").unwrap());
    store.import(&a, "x", Bounds::default()).unwrap();
    // `x` moved back to the first root; the second has no name left and is gone.
    assert_eq!(roots(store.dir()), vec![first]);
}

#[test]
fn a_store_with_planted_links_is_refused_and_nothing_is_written_through_them() {
    let dir = tempfile::tempdir().unwrap();
    let tar = root_tar(dir.path(), "a", b"a");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep"), "keep\n").unwrap();

    // The lock file, one of the store's directories, the store itself: each a link.
    for what in ["lock", "tmp", "store"] {
        let s = dir.path().join(format!("store-{what}"));
        match what {
            "lock" => {
                std::fs::create_dir(&s).unwrap();
                std::os::unix::fs::symlink(&victim, s.join("lock")).unwrap();
            }
            "tmp" => {
                std::fs::create_dir(&s).unwrap();
                std::os::unix::fs::symlink(&elsewhere, s.join("tmp")).unwrap();
            }
            _ => std::os::unix::fs::symlink(&elsewhere, &s).unwrap(),
        }
        let mut with_slash = s.clone().into_os_string();
        with_slash.push("/");
        for at in [s.clone(), with_slash.into()] {
            let e = Store::open(&at)
                .import(&tar, "x", Bounds::default())
                .unwrap_err();
            assert!(matches!(e, ImageError::NotOwnStore { .. }), "{what}: {e}");
            let e = Store::open(&at).remove("x").unwrap_err();
            assert!(matches!(e, ImageError::NotOwnStore { .. }), "{what}: {e}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let left: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
        assert_eq!(
            left.len(),
            1,
            "{what}: something was written through the link"
        );
    }
}
