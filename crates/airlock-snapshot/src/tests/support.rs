//! Helpers: a store in a temporary directory, a sandbox-like data root, a listing of a tree
//! to compare, and crafted payloads published with a valid MAC.
use std::collections::BTreeMap;
use std::fs::{File, FileTimes};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use airlock_jail::dirfd::DirFd;
use tempfile::TempDir;

use crate::encode::write_err;
use crate::payload::{self, tag, EntryMeta};
use crate::{Bounds, SnapshotId, Store, Tree};

/// The three directories a sandbox's data root holds.
pub(crate) const DIRS: &[&str] = &["work", "tmp", "shm"];

/// A store in a fresh temporary directory (`<tmp>/state`, made by `open`).
pub(crate) fn store() -> (TempDir, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join("state")).unwrap();
    (tmp, store)
}

/// A data root with empty `work`, `tmp` (1777) and `shm` directories.
pub(crate) fn data_root() -> (TempDir, DirFd) {
    let tmp = tempfile::tempdir().unwrap();
    for d in DIRS {
        std::fs::create_dir(tmp.path().join(d)).unwrap();
    }
    chmod(&tmp.path().join("tmp"), 0o1777);
    let fd = DirFd::open(tmp.path()).unwrap();
    (tmp, fd)
}

pub(crate) fn tree(root: &DirFd) -> Tree<'_> {
    Tree { root, dirs: DIRS }
}

pub(crate) fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Sets `p`'s mtime to `secs` seconds and `nanos` nanoseconds after the epoch.
pub(crate) fn set_mtime(p: &Path, secs: u64, nanos: u32) {
    let t = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
    File::open(p)
        .unwrap()
        .set_times(FileTimes::new().set_modified(t))
        .unwrap();
}

pub(crate) fn write_file(p: &Path, bytes: &[u8], mode: u32) {
    File::create(p).unwrap().write_all(bytes).unwrap();
    chmod(p, mode);
}

/// What a tree holds, path by path: kind, mode, mtime (not for links) and content or target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Dir {
        mode: u32,
        mtime: (i64, i64),
    },
    File {
        mode: u32,
        mtime: (i64, i64),
        content: Vec<u8>,
    },
    Link {
        target: PathBuf,
    },
}

pub(crate) fn listing(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    for d in DIRS {
        walk(root, Path::new(d), &mut out);
    }
    out
}

fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, Node>) {
    let p = root.join(rel);
    let m = std::fs::symlink_metadata(&p).unwrap();
    let mode = m.mode() & 0o7777;
    let mtime = (m.mtime(), m.mtime_nsec());
    let node = if m.file_type().is_symlink() {
        Node::Link {
            target: std::fs::read_link(&p).unwrap(),
        }
    } else if m.is_dir() {
        for e in std::fs::read_dir(&p).unwrap() {
            walk(root, &rel.join(e.unwrap().file_name()), out);
        }
        Node::Dir { mode, mtime }
    } else {
        Node::File {
            mode,
            mtime,
            content: std::fs::read(&p).unwrap(),
        }
    };
    out.insert(rel.to_owned(), node);
}

/// Builds a payload record by record (what a hostile body could say).
#[derive(Debug, Default)]
pub(crate) struct Crafted {
    pub(crate) bytes: Vec<u8>,
    entries: u64,
    content: u64,
}

pub(crate) const META: EntryMeta = EntryMeta {
    mode: 0o755,
    mtime: 1_000_000,
    mtime_nsec: 0,
};

impl Crafted {
    pub(crate) fn new() -> Crafted {
        let mut c = Crafted::default();
        payload::put_manifest(&mut c.bytes, b"{}").unwrap();
        payload::put_kernel_marker(&mut c.bytes, payload::KernelAt::Absent).unwrap();
        c
    }

    pub(crate) fn dir(mut self, name: &str, mode: u32) -> Crafted {
        let m = EntryMeta { mode, ..META };
        payload::put_entry(&mut self.bytes, tag::DIR, name.as_bytes(), m).unwrap();
        self.entries += 1;
        self
    }

    pub(crate) fn up(mut self) -> Crafted {
        self.bytes.push(tag::UP);
        self
    }

    pub(crate) fn file(mut self, name: &str, mode: u32, content: &[u8]) -> Crafted {
        let m = EntryMeta { mode, ..META };
        payload::put_entry(&mut self.bytes, tag::FILE, name.as_bytes(), m).unwrap();
        if !content.is_empty() {
            payload::put_chunk(&mut self.bytes, content).unwrap();
        }
        payload::put_chunks_end(&mut self.bytes).unwrap();
        self.entries += 1;
        self.content += content.len() as u64;
        self
    }

    pub(crate) fn link(mut self, name: &str, target: &str) -> Crafted {
        payload::put_link(&mut self.bytes, name.as_bytes(), target.as_bytes()).unwrap();
        self.entries += 1;
        self.content += target.len() as u64;
        self
    }

    /// Raw bytes as they are (a record this format does not have, a bad name...).
    pub(crate) fn raw(mut self, bytes: &[u8]) -> Crafted {
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub(crate) fn end(mut self) -> Vec<u8> {
        payload::put_end(&mut self.bytes, self.entries, self.content).unwrap();
        self.bytes
    }
}

/// Publishes `payload` in `store` as a snapshot with a valid MAC.
pub(crate) fn publish(store: &Store, payload: &[u8]) -> SnapshotId {
    let ((), info, _) = store
        .write_with(|enc| enc.write_all(payload).map_err(write_err))
        .unwrap();
    info.id
}

/// The path of a snapshot's file.
pub(crate) fn file_of(store: &Store, id: &SnapshotId) -> PathBuf {
    store.dir().join("snapshots").join(id.as_str())
}

/// Names in a directory.
pub(crate) fn names(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| String::from_utf8_lossy(e.unwrap().file_name().as_bytes()).into_owned())
        .collect();
    v.sort();
    v
}

/// Small bounds for tests.
pub(crate) fn small_bounds() -> Bounds {
    Bounds {
        max_bytes: 1 << 20,
        max_entries: 100,
        max_depth: 4,
        max_kernel_bytes: 1 << 20,
    }
}

/// `len` bytes, half repetitive, half noise (xorshift from `seed`).
pub(crate) fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if (i / 4096) % 2 == 0 {
                i.to_le_bytes()[0] / 8
            } else {
                s.to_le_bytes()[3]
            }
        })
        .collect()
}
