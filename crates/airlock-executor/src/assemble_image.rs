//! A sandbox root from an image: every top-level entry of the image's unpacked root (a
//! directory of airlock's image store) is bound read-only, nosuid, nodev at the same place in
//! the sandbox's root, and a top-level symlink (`bin -> usr/bin`) is made again as the same
//! symlink. Nothing of the host's own system directories is bound.
//!
//! The entries are listed and opened beneath a handle on the image root with no link followed
//! (`openat2`), so a link in the image (`usr -> /`) is reproduced as a link that resolves inside
//! the sandbox, never bound from the host. The names the sandbox provides itself (`/proc`,
//! `/dev`, `/sys`, `/tmp`, `/work`) and hidden names are skipped: the image's copies of them are
//! never visible.
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use airlock_jail::dirfd::{DirFd, FileKind};
use airlock_jail::mounts::{self, Attrs};

use crate::assemble_error::{at, AssembleError};
use crate::bind_source::Source;
use crate::container;

/// Top-level names the sandbox provides itself.
const RESERVED: [&str; 5] = ["proc", "dev", "sys", "tmp", "work"];
/// Most top-level entries an image root may have.
const MAX_TOP: usize = 256;

/// The binds and the symlinks of the image root at `root`.
#[allow(clippy::type_complexity, reason = "the same pair open_sources returns")]
pub(crate) fn open_image(
    root: &Path,
) -> Result<(Vec<Source>, Vec<(PathBuf, PathBuf)>), AssembleError> {
    let dir = DirFd::open(root).map_err(at("open image"))?;
    let mut names = dir.entries(MAX_TOP).map_err(at("list image"))?;
    names.sort();
    let (mut sources, mut links) = (Vec::new(), Vec::new());
    for name in names {
        let skip = name.as_bytes().starts_with(b".")
            || RESERVED.iter().any(|r| name.as_bytes() == r.as_bytes());
        if skip {
            continue;
        }
        let guest = Path::new("/").join(&name);
        let meta = dir.stat_at(&name).map_err(at("image entry"))?;
        match meta.kind {
            FileKind::Directory | FileKind::Regular => {
                let fd = dir
                    .open_path(&name.to_string_lossy())
                    .map_err(at("image entry"))?;
                let tree = mounts::detached_copy(fd.as_fd(), Attrs::SYSTEM)
                    .map_err(container::explain(container::CLONE_TREE))
                    .map_err(at("bind image"))?;
                sources.push(Source {
                    guest,
                    tree,
                    dir: meta.kind == FileKind::Directory,
                });
            }
            FileKind::Symlink => {
                let target = dir.read_link_at(&name).map_err(at("image link"))?;
                links.push((guest, PathBuf::from(target)));
            }
            _ => {}
        }
    }
    Ok((sources, links))
}
