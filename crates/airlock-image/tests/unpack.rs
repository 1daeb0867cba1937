//! The applier's semantics on small layers: whiteouts and opaque directories across layers,
//! links planted by one entry and used by the next, replacements, modes. (The hostile images
//! against the real binary, as two users, are in airlock-cli's `images_all` suite.)
#![allow(clippy::unwrap_used, reason = "tests")]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use airlock_image::bounds::{Bounds, Budget};
use airlock_image::tar::header::{encode, BLOCK};
use airlock_image::unpack::{apply_layer, Applier};
use airlock_jail::dirfd::DirFd;

/// A tar stream of (type flag, name, link, mode, content) entries.
fn tar(entries: &[(u8, &str, &str, u32, &[u8])]) -> Vec<u8> {
    let mut v = Vec::new();
    for (kind, name, link, mode, body) in entries {
        v.extend(encode(
            *kind,
            name.as_bytes(),
            link.as_bytes(),
            *mode,
            body.len() as u64,
        ));
        v.extend_from_slice(body);
        v.resize(v.len().div_ceil(BLOCK) * BLOCK, 0);
    }
    v.extend([0u8; 2 * BLOCK]);
    v
}

fn apply(root: &Path, layers: &[Vec<u8>]) -> airlock_image::Result<()> {
    let dir = DirFd::open(root).unwrap();
    let mut applier = Applier::new(&dir);
    let mut budget = Budget::new(Bounds::default());
    for l in layers {
        apply_layer(&l[..], &mut applier, &mut budget)?;
    }
    applier.finish().map(drop)
}

#[test]
fn whiteouts_and_opaque_dirs_hide_only_lower_layers() {
    let root = tempfile::tempdir().unwrap();
    let lower = tar(&[
        (b'0', "keep/a", "", 0o644, b"a"),
        (b'0', "gone/b", "", 0o644, b"b"),
        (b'0', "opq/c", "", 0o644, b"c"),
        (b'0', "opq/sub/e", "", 0o644, b"e"),
    ]);
    let upper = tar(&[
        (b'0', "opq/d", "", 0o644, b"d"),
        (b'5', "opq/sub/", "", 0o755, b""),
        (b'0', "opq/.wh..wh..opq", "", 0o644, b""),
        (b'0', "gone/.wh.b", "", 0o644, b""),
        (b'0', "keep/.wh.nothing-there", "", 0o644, b""),
    ]);
    apply(root.path(), &[lower, upper]).unwrap();
    let p = root.path();
    assert!(p.join("keep/a").is_file());
    assert!(!p.join("gone/b").exists());
    assert!(!p.join("opq/c").exists());
    assert!(p.join("opq/d").is_file(), "the opaque layer's own entry");
    assert!(
        p.join("opq/sub").is_dir(),
        "the opaque layer's own directory"
    );
    assert!(
        !p.join("opq/sub/e").exists(),
        "a lower entry under the layer's own directory"
    );
}

#[test]
fn a_link_planted_by_one_entry_leads_only_inside_the_root() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("host");
    std::fs::write(&target, "host").unwrap();
    let layer = tar(&[
        (b'2', "out", outside.path().to_str().unwrap(), 0o777, b""),
        (b'0', "out/host", "", 0o644, b"pwned"),
        (b'2', "rel", "../../../../../../../..", 0o777, b""),
        (b'5', "rel/tmp/", "", 0o755, b""),
        (b'0', "rel/tmp/x", "", 0o644, b"x"),
    ]);
    // `out` resolves to <root>/<outside> (absent): refused, never the host directory.
    assert!(apply(root.path(), &[layer]).is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "host");
    let root = tempfile::tempdir().unwrap();
    let layer = tar(&[
        (b'2', "rel", "../../../../../../../..", 0o777, b""),
        (b'5', "rel/tmp/", "", 0o755, b""),
        (b'0', "rel/tmp/x", "", 0o644, b"x"),
    ]);
    apply(root.path(), &[layer]).unwrap();
    // `..` climbed no higher than the root: the file is the root's own tmp/x.
    assert_eq!(
        std::fs::read_to_string(root.path().join("tmp/x")).unwrap(),
        "x"
    );
}

#[test]
fn replacements_hard_links_and_modes() {
    let root = tempfile::tempdir().unwrap();
    let lower = tar(&[
        (b'0', "f", "", 0o644, b"file"),
        (b'5', "d/", "", 0o755, b""),
        (b'0', "d/inner", "", 0o644, b"inner"),
        (b'2', "l", "/etc/passwd", 0o777, b""),
    ]);
    let upper = tar(&[
        (b'5', "f/", "", 0o700, b""),
        (b'0', "d", "", 0o644, b"now a file"),
        (b'0', "l", "", 0o644, b"no longer a link"),
        (b'0', "suid", "", 0o6755, b"x"),
        (b'1', "hard", "suid", 0o644, b""),
        (b'5', "ro/", "", 0o500, b""),
        (b'0', "ro/in", "", 0o400, b"ro"),
    ]);
    apply(root.path(), &[lower, upper]).unwrap();
    let p = root.path();
    assert!(p.join("f").is_dir());
    assert_eq!(std::fs::read_to_string(p.join("d")).unwrap(), "now a file");
    assert!(std::fs::symlink_metadata(p.join("l")).unwrap().is_file());
    let suid = std::fs::metadata(p.join("suid")).unwrap();
    assert_eq!(suid.mode() & 0o7777, 0o755, "set-id bits stripped");
    assert_eq!(suid.ino(), std::fs::metadata(p.join("hard")).unwrap().ino());
    // A read-only directory keeps its owner's rwx (the store must be able to remove it).
    let ro = std::fs::metadata(p.join("ro"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(ro & 0o777, 0o700);
}

#[test]
fn hard_links_may_not_point_outside_or_at_directories() {
    for (target, why) in [
        ("../etc/passwd", "'..'"),
        ("nowhere", "missing"),
        ("d", "not a file"),
    ] {
        let root = tempfile::tempdir().unwrap();
        let layer = tar(&[
            (b'5', "d/", "", 0o755, b""),
            (b'1', "h", target, 0o644, b""),
        ]);
        let e = apply(root.path(), &[layer]).unwrap_err().to_string();
        assert!(e.contains(why), "{target}: {e}");
    }
}
