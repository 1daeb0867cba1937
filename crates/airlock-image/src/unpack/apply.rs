//! The applier: one archive entry at a time into a root under construction.
//!
//! Directories are created owner-only (`0700`) while the import runs, so an importer that is not
//! root can still write beneath one the image makes read-only; their own modes are applied at
//! [`Applier::finish`], deepest first.
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use airlock_jail::dirfd::{DirFd, FileKind};

use super::path::{join, EntryPath};
use crate::bounds::Budget;
use crate::error::{ImageError, Result};
use crate::tar::{Entry, Kind};

/// Whiteout prefix (OCI image spec, "Whiteouts").
const WHITEOUT: &[u8] = b".wh.";
/// An opaque directory's marker.
const OPAQUE: &[u8] = b".wh..wh..opq";
/// Mode bits kept: permissions and sticky; set-uid and set-gid are stripped.
const KEPT_MODE: u32 = 0o1777;

/// What an import dropped or changed, for the importer to report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// Device nodes under `/dev` dropped (the sandbox has its own `/dev`).
    pub devices_dropped: u64,
    /// FIFOs and sockets dropped.
    pub specials_dropped: u64,
    /// Files and directories whose set-uid/set-gid bits were stripped.
    pub setid_stripped: u64,
    /// Whiteouts and opaque markers applied.
    pub whiteouts: u64,
}

/// Writes entries beneath `root`.
#[derive(Debug)]
pub struct Applier<'a> {
    root: &'a DirFd,
    /// Final modes of every directory made, by path.
    dirs: HashMap<Vec<u8>, u32>,
    /// Paths the current layer wrote.
    written: HashSet<Vec<u8>>,
    /// Strict ancestors of those.
    touched: HashSet<Vec<u8>>,
    report: Report,
}

fn io(what: &str, path: &[u8]) -> impl FnOnce(std::io::Error) -> ImageError {
    let what = format!("{what} {}", String::from_utf8_lossy(path));
    ImageError::io(what)
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

fn mtime(secs: i64) -> SystemTime {
    let d = Duration::from_secs(secs.unsigned_abs());
    let t = if secs >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(d)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(d)
    };
    t.unwrap_or(SystemTime::UNIX_EPOCH)
}

impl<'a> Applier<'a> {
    /// An applier writing beneath `root` (an empty directory the importer owns).
    #[must_use]
    pub fn new(root: &'a DirFd) -> Applier<'a> {
        Applier {
            root,
            dirs: HashMap::new(),
            written: HashSet::new(),
            touched: HashSet::new(),
            report: Report::default(),
        }
    }

    /// Starts a new layer: whiteouts from here on hide only what earlier layers wrote.
    pub fn start_layer(&mut self) {
        self.written.clear();
        self.touched.clear();
    }

    /// Applies one entry; `body` is its content (files only).
    pub fn apply(&mut self, e: &Entry, body: &mut impl Read, budget: &mut Budget) -> Result<()> {
        let Some(path) = EntryPath::parse(&e.path, budget.bounds())? else {
            return Ok(()); // the root itself keeps airlock's mode
        };
        let name = path.name().as_bytes();
        if let Some(hidden) = name.strip_prefix(WHITEOUT) {
            self.report.whiteouts += 1;
            return self.whiteout(&path, hidden, name == OPAQUE, budget);
        }
        match e.kind {
            Kind::Directory => self.dir(&path, e.mode, budget)?,
            Kind::File => self.file(&path, e, body, budget)?,
            Kind::Symlink => self.symlink(&path, &e.link, budget)?,
            Kind::HardLink => self.hard_link(&path, &e.link, budget)?,
            Kind::CharDevice | Kind::BlockDevice if path.first() == b"dev" => {
                self.report.devices_dropped += 1;
                return Ok(());
            }
            Kind::CharDevice | Kind::BlockDevice => {
                return Err(ImageError::DeviceNode(
                    String::from_utf8_lossy(&e.path).into_owned(),
                ))
            }
            Kind::Fifo => {
                self.report.specials_dropped += 1;
                return Ok(());
            }
            Kind::GnuLongName | Kind::GnuLongLink | Kind::Pax | Kind::PaxGlobal => {
                return Err(ImageError::Tar("an extended header with no entry".into()))
            }
        }
        self.mark_written(&path);
        Ok(())
    }

    /// Dropped a FIFO or socket met outside a tar stream (a directory walk).
    pub(crate) fn dropped_special(&mut self) {
        self.report.specials_dropped += 1;
    }

    fn mark_written(&mut self, path: &EntryPath) {
        let joined = path.joined();
        for (i, b) in joined.iter().enumerate() {
            if *b == b'/' {
                self.touched.insert(joined[..i].to_vec());
            }
        }
        self.written.insert(joined);
    }

    fn strip(&mut self, mode: u32) -> u32 {
        if mode & 0o6000 != 0 {
            self.report.setid_stripped += 1;
        }
        mode & KEPT_MODE
    }

    /// The directory at `comps`, made (with its parents) when missing.
    fn ensure_dir(&mut self, comps: &[Vec<u8>], budget: &mut Budget) -> Result<DirFd> {
        let rel = join(comps);
        match self.root.open_dir_in_root(OsStr::from_bytes(&rel)) {
            Ok(d) => return Ok(d),
            Err(e) if errno(&e) == libc::ENOENT && !comps.is_empty() => {}
            Err(e) => return Err(io("parent directory", &rel)(e)),
        }
        let (last, up) = comps
            .split_last()
            .ok_or_else(|| ImageError::Tar("no root".into()))?;
        let parent = self.ensure_dir(up, budget)?;
        budget.take_entry()?;
        match parent.mkdir_at(OsStr::from_bytes(last), 0o700) {
            Ok(()) => {
                self.dirs.entry(rel.clone()).or_insert(0o755);
            }
            Err(e) if errno(&e) == libc::EEXIST => {}
            Err(e) => return Err(io("mkdir", &rel)(e)),
        }
        self.root
            .open_dir_in_root(OsStr::from_bytes(&rel))
            .map_err(io("parent directory", &rel))
    }

    /// Removes whatever is at `name` (a directory with everything beneath it).
    fn clear(parent: &DirFd, name: &OsStr, budget: &Budget) -> Result<()> {
        let mut left = budget.entries_left();
        parent
            .remove_tree_at(name, &mut left)
            .map_err(io("replace", name.as_bytes()))
    }

    fn dir(&mut self, path: &EntryPath, mode: u32, budget: &mut Budget) -> Result<()> {
        let parent = self.ensure_dir(path.parent(), budget)?;
        let name = path.name();
        match parent.stat_at(name) {
            Ok(m) if m.kind == FileKind::Directory => {}
            Ok(_) => {
                Self::clear(&parent, name, budget)?;
                parent
                    .mkdir_at(name, 0o700)
                    .map_err(io("mkdir", &path.joined()))?;
            }
            Err(e) if errno(&e) == libc::ENOENT => {
                parent
                    .mkdir_at(name, 0o700)
                    .map_err(io("mkdir", &path.joined()))?;
            }
            Err(e) => return Err(io("stat", &path.joined())(e)),
        }
        let mode = self.strip(mode);
        self.dirs.insert(path.joined(), mode);
        Ok(())
    }

    fn file(
        &mut self,
        path: &EntryPath,
        e: &Entry,
        body: &mut impl Read,
        budget: &mut Budget,
    ) -> Result<()> {
        let parent = self.ensure_dir(path.parent(), budget)?;
        let name = path.name();
        let joined = path.joined();
        Self::clear(&parent, name, budget)?;
        let mut f = parent
            .create_at(name, 0o600)
            .map_err(io("create", &joined))?;
        let n = std::io::copy(&mut body.take(e.size), &mut f).map_err(io("write", &joined))?;
        if n != e.size {
            return Err(ImageError::Tar(format!(
                "{} is truncated",
                String::from_utf8_lossy(&joined)
            )));
        }
        let mode = self.strip(e.mode);
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io("chmod", &joined))?;
        let t = mtime(e.mtime);
        f.set_times(std::fs::FileTimes::new().set_modified(t).set_accessed(t))
            .map_err(io("set times of", &joined))
    }

    fn symlink(&mut self, path: &EntryPath, target: &[u8], budget: &mut Budget) -> Result<()> {
        if target.is_empty() || target.len() > budget.bounds().max_path {
            return Err(ImageError::Path {
                path: String::from_utf8_lossy(&path.joined()).into_owned(),
                why: "symlink target is empty or longer than the import bound",
            });
        }
        let parent = self.ensure_dir(path.parent(), budget)?;
        Self::clear(&parent, path.name(), budget)?;
        parent
            .symlink_at(OsStr::from_bytes(target), path.name())
            .map_err(io("symlink", &path.joined()))
    }

    fn hard_link(&mut self, path: &EntryPath, target: &[u8], budget: &mut Budget) -> Result<()> {
        let refuse = |why| ImageError::Path {
            path: String::from_utf8_lossy(&path.joined()).into_owned(),
            why,
        };
        let target = EntryPath::parse(target, budget.bounds())?
            .ok_or_else(|| refuse("hard link to the root"))?;
        if target.joined() == path.joined() {
            return Err(refuse("hard link to itself"));
        }
        let from = self
            .root
            .open_dir_in_root(OsStr::from_bytes(&join(target.parent())))
            .map_err(|_| refuse("hard link to a missing entry"))?;
        match from.stat_at(target.name()) {
            Ok(m) if m.kind == FileKind::Regular || m.kind == FileKind::Symlink => {}
            Ok(_) => return Err(refuse("hard link to something that is not a file")),
            Err(_) => return Err(refuse("hard link to a missing entry")),
        }
        let parent = self.ensure_dir(path.parent(), budget)?;
        Self::clear(&parent, path.name(), budget)?;
        parent
            .link_at(&from, target.name(), path.name())
            .map_err(io("link", &path.joined()))
    }

    fn whiteout(
        &mut self,
        path: &EntryPath,
        hidden: &[u8],
        opaque: bool,
        budget: &mut Budget,
    ) -> Result<()> {
        let parent_rel = join(path.parent());
        let parent = match self.root.open_dir_in_root(OsStr::from_bytes(&parent_rel)) {
            Ok(d) => d,
            Err(e) if matches!(errno(&e), libc::ENOENT | libc::ENOTDIR) => return Ok(()),
            Err(e) => return Err(io("whiteout in", &parent_rel)(e)),
        };
        if opaque {
            let mut left = budget.entries_left();
            return self.prune_children(&parent, path.parent(), &mut left);
        }
        if hidden.starts_with(WHITEOUT) || hidden.is_empty() || hidden == b"." || hidden == b".." {
            return Ok(()); // other aufs metadata, or nothing a whiteout can name
        }
        let mut target = path.parent().to_vec();
        target.push(hidden.to_vec());
        if self.written.contains(&join(&target)) {
            return Ok(());
        }
        Self::clear(&parent, OsStr::from_bytes(hidden), budget)
    }

    /// Removes everything beneath `dir` (at `comps`) the current layer did not write.
    fn prune_children(&self, dir: &DirFd, comps: &[Vec<u8>], left: &mut usize) -> Result<()> {
        let names = dir.entries(*left).map_err(io("list", &join(comps)))?;
        for name in names {
            let mut child = comps.to_vec();
            child.push(name.as_bytes().to_vec());
            let key = join(&child);
            let is_dir = dir
                .stat_at(&name)
                .is_ok_and(|m| m.kind == FileKind::Directory);
            if self.touched.contains(&key) || (is_dir && self.written.contains(&key)) {
                if is_dir {
                    let sub = dir.open_dir_at(&name).map_err(io("open", &key))?;
                    self.prune_children(&sub, &child, left)?;
                }
            } else if !self.written.contains(&key) {
                dir.remove_tree_at(&name, left)
                    .map_err(io("remove", &key))?;
            }
        }
        Ok(())
    }

    /// Applies the directories' own modes (deepest first; the owner always keeps `rwx`, so the
    /// store can remove what it made) and returns what was dropped.
    pub fn finish(self) -> Result<Report> {
        let mut dirs: Vec<(Vec<u8>, u32)> = self.dirs.into_iter().collect();
        dirs.sort_by_key(|(p, _)| std::cmp::Reverse(p.iter().filter(|b| **b == b'/').count()));
        for (path, mode) in dirs {
            let (up, name) = match path.iter().rposition(|b| *b == b'/') {
                Some(i) => (&path[..i], &path[i + 1..]),
                None => (&b"."[..], &path[..]),
            };
            let Ok(parent) = self.root.open_dir_in_root(OsStr::from_bytes(up)) else {
                continue; // removed by a later whiteout
            };
            let Ok(dir) = parent.open_dir_at(OsStr::from_bytes(name)) else {
                continue; // replaced by a file or a link
            };
            let file = std::fs::File::from(OwnedFd::from(dir));
            file.set_permissions(std::fs::Permissions::from_mode(mode | 0o700))
                .map_err(io("chmod", &path))?;
        }
        Ok(self.report)
    }
}
