//! A plain root directory (what `mmdebstrap` writes into a directory), walked by directory
//! handle and never through a link: each entry goes through the same applier as a layer's,
//! and a digest of the walk (paths, kinds, modes, times, link targets, contents, in name order)
//! names the root.
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use airlock_jail::dirfd::{DirFd, FileKind};
use sha2::{Digest as _, Sha256};

use crate::bounds::Budget;
use crate::digest::{self, Digest};
use crate::error::{ImageError, Result};
use crate::tar::{Entry, Kind};
use crate::unpack::Applier;

/// Applies the tree beneath `src` and returns its digest.
pub fn apply_dir(src: &DirFd, applier: &mut Applier<'_>, budget: &mut Budget) -> Result<Digest> {
    applier.start_layer();
    let mut walk = Walk {
        applier,
        budget,
        hash: Sha256::new(),
        links: HashMap::new(),
    };
    walk.dir(src, b"", 0)?;
    Ok(digest::finish(walk.hash))
}

struct Walk<'a, 'b> {
    applier: &'a mut Applier<'b>,
    budget: &'a mut Budget,
    hash: Sha256,
    /// The first path of every multiply-linked file, by device and inode.
    links: HashMap<(u64, u64), Vec<u8>>,
}

fn io(what: &str, path: &[u8]) -> impl FnOnce(std::io::Error) -> ImageError {
    ImageError::io(format!(
        "{what} {} (import a directory you can read in full, or a tarball of it)",
        String::from_utf8_lossy(path)
    ))
}

/// Feeds what is read into the walk's hash.
struct Tee<'h, R> {
    inner: R,
    hash: &'h mut Sha256,
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

impl Walk<'_, '_> {
    fn dir(&mut self, dir: &DirFd, at: &[u8], depth: usize) -> Result<()> {
        if depth > self.budget.bounds().max_depth {
            return Err(ImageError::Path {
                path: String::from_utf8_lossy(at).into_owned(),
                why: "path is nested deeper than the import bound",
            });
        }
        let mut names = dir
            .entries(self.budget.entries_left().saturating_add(1))
            .map_err(io("list", at))?;
        names.sort();
        for name in names {
            let mut path = at.to_vec();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name.as_bytes());
            self.one(dir, &name, path, depth)?;
        }
        Ok(())
    }

    fn one(&mut self, dir: &DirFd, name: &OsStr, path: Vec<u8>, depth: usize) -> Result<()> {
        let m = dir.stat_at(name).map_err(io("stat", &path))?;
        self.budget.take_entry()?;
        let mut e = Entry {
            kind: Kind::File,
            path,
            link: Vec::new(),
            mode: m.mode,
            size: 0,
            mtime: m.mtime,
        };
        match m.kind {
            FileKind::Directory => {
                e.kind = Kind::Directory;
                self.apply(&e, &mut std::io::empty())?;
                let sub = dir.open_dir_at(name).map_err(io("open", &e.path))?;
                return self.dir(&sub, &e.path, depth + 1);
            }
            FileKind::Regular if m.nlink > 1 && self.links.contains_key(&(m.dev, m.ino)) => {
                e.kind = Kind::HardLink;
                e.link = self.links[&(m.dev, m.ino)].clone();
            }
            FileKind::Regular => {
                if m.nlink > 1 {
                    self.links.insert((m.dev, m.ino), e.path.clone());
                }
                self.budget.take_bytes(m.size)?;
                e.size = m.size;
                let f = dir.open_read_at(name).map_err(io("read", &e.path))?;
                self.header(&e);
                let mut tee = Tee {
                    inner: f,
                    hash: &mut self.hash,
                };
                return self.applier.apply(&e, &mut tee, self.budget);
            }
            FileKind::Symlink => {
                e.kind = Kind::Symlink;
                e.link = dir
                    .read_link_at(name)
                    .map_err(io("read link", &e.path))?
                    .into_vec();
            }
            FileKind::CharDevice | FileKind::BlockDevice => e.kind = Kind::CharDevice,
            FileKind::Fifo | FileKind::Socket | FileKind::Other => {
                self.applier.dropped_special();
                return Ok(());
            }
        }
        self.apply(&e, &mut std::io::empty())
    }

    fn apply(&mut self, e: &Entry, body: &mut impl Read) -> Result<()> {
        self.header(e);
        self.applier.apply(e, body, self.budget)
    }

    fn header(&mut self, e: &Entry) {
        let kind = format!("{:?}", e.kind);
        for part in [kind.as_bytes(), &e.path, &e.link] {
            self.hash.update((part.len() as u64).to_le_bytes());
            self.hash.update(part);
        }
        self.hash.update(u64::from(e.mode).to_le_bytes());
        self.hash.update(e.mtime.to_le_bytes());
        self.hash.update(e.size.to_le_bytes());
    }
}
