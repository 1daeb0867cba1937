//! The no-follow directory primitives against the attacks they exist for: symlinked parents
//! and leaves, dangling links in the way of an exclusive create, FIFOs, escapes, oversized
//! directories, and a tree removal that must not follow a link out.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::io::{Read, Write};
use std::os::unix::fs::symlink;

use airlock_jail::dirfd::{fstat, DirFd, FileKind};

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

#[test]
fn symlinks_are_never_followed() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"host secret").unwrap();
    symlink(outside.path(), root.path().join("dirlink")).unwrap();
    symlink(outside.path().join("secret"), root.path().join("filelink")).unwrap();
    std::fs::create_dir(root.path().join("d")).unwrap();
    std::fs::write(root.path().join("d/ok"), b"ok").unwrap();
    let d = DirFd::open(root.path()).unwrap();

    let e = errno(&d.open_read("dirlink/secret").unwrap_err());
    assert!(e == libc::ELOOP || e == libc::ENOTDIR, "errno {e}");
    assert_eq!(errno(&d.open_read("filelink").unwrap_err()), libc::ELOOP);
    // O_DIRECTORY | O_NOFOLLOW on a link to a directory reports ENOTDIR.
    let e = errno(&d.open_dir("dirlink").unwrap_err());
    assert!(e == libc::ELOOP || e == libc::ENOTDIR, "errno {e}");
    assert_eq!(errno(&d.open_read("../x").unwrap_err()), libc::EXDEV);
    assert!(d.open_read("/etc/passwd").is_err());
    let mut s = String::new();
    d.open_read("d/ok").unwrap().read_to_string(&mut s).unwrap();
    assert_eq!(s, "ok");
    // An O_PATH handle and fstatat both see the link itself.
    let p = d.open_path("filelink").unwrap();
    use std::os::fd::AsFd;
    assert_eq!(fstat(p.as_fd()).unwrap().kind, FileKind::Symlink);
    assert_eq!(d.stat_at("filelink").unwrap().kind, FileKind::Symlink);
}

#[test]
fn exclusive_create_refuses_a_dangling_link() {
    let root = tempfile::tempdir().unwrap();
    let target = root.path().join("would-be-created");
    symlink(&target, root.path().join("leaf")).unwrap();
    let d = DirFd::open(root.path()).unwrap();
    assert_eq!(
        errno(&d.create_at("leaf", 0o600).unwrap_err()),
        libc::EEXIST
    );
    assert!(!target.exists());
    let mut f = d.create_at("fresh", 0o600).unwrap();
    f.write_all(b"x").unwrap();
    assert_eq!(
        errno(&d.create_at("fresh", 0o600).unwrap_err()),
        libc::EEXIST
    );
}

#[test]
fn a_fifo_opens_without_blocking_and_reads_as_a_fifo() {
    let root = tempfile::tempdir().unwrap();
    let c = std::ffi::CString::new(root.path().join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: a valid path; mkfifo only creates a node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let d = DirFd::open(root.path()).unwrap();
    let f = d.open_read("pipe").unwrap();
    use std::os::fd::AsFd;
    assert_eq!(fstat(f.as_fd()).unwrap().kind, FileKind::Fifo);
}

#[test]
fn listings_are_bounded_and_tree_removal_stays_inside() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), b"k").unwrap();
    std::fs::create_dir_all(root.path().join("t/a/b")).unwrap();
    for i in 0..10 {
        std::fs::write(root.path().join(format!("t/a/f{i}")), b"x").unwrap();
    }
    symlink(outside.path(), root.path().join("t/a/b/out")).unwrap();
    let d = DirFd::open(root.path()).unwrap();
    let a = d.open_dir("t/a").unwrap();
    assert_eq!(a.entries(100).unwrap().len(), 11);
    assert_eq!(errno(&a.entries(5).unwrap_err()), libc::E2BIG);
    let mut budget = 3;
    assert!(d.remove_tree_at("t", &mut budget).is_err());
    let mut budget = 1000;
    d.remove_tree_at("t", &mut budget).unwrap();
    assert!(!root.path().join("t").exists());
    assert!(outside.path().join("keep").exists());
    d.remove_tree_at("t", &mut budget).unwrap();
}

#[test]
fn rename_no_replace_refuses_an_occupied_name() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a"), b"a").unwrap();
    std::fs::write(root.path().join("b"), b"b").unwrap();
    let d = DirFd::open(root.path()).unwrap();
    assert_eq!(
        errno(&d.rename_at("a", "b", true).unwrap_err()),
        libc::EEXIST
    );
    d.rename_at("a", "b", false).unwrap();
    assert_eq!(std::fs::read(root.path().join("b")).unwrap(), b"a");
}
