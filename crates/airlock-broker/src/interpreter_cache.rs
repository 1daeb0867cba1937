//! Interpreter discovery kept on disk, per user, so a short-lived process (the `airlock run`
//! CLI) does not probe the interpreter again on every invocation (~25–40 ms: CPython with
//! `site` plus compiling the bootstrap).
//!
//! An entry is used only when everything that shaped the answer is unchanged: the binary the
//! requested path resolves to (the link itself and its target), the canonical executable,
//! every prefix and its `pyvenv.cfg`, every `sys.path` entry, every candidate site directory
//! (present or not), every `.pth` file in them and a `sitecustomize.py`/`usercustomize.py`
//! on the path — each by device, inode, size, mtime and ctime (ctime cannot be set back by a
//! user) — and a hash of the probe and of the guest bootstrap the entry's code object was
//! compiled from. Anything else changed means a fresh probe, never a stale Landlock set, mount
//! set or code object.
//!
//! The file lives in a directory owned by the effective user with no group or other access;
//! an entry file not owned by the effective user, or writable by anyone else, is ignored (and
//! replaced). Whoever can write it is the user the broker runs as already.
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use airlock_jail::identity::effective_uid;
use serde::{Deserialize, Serialize};

use crate::interpreter_facts::Interpreter;

/// Cap on the cache file (a few entries of a few tens of KiB each).
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Entries kept (the most recent first).
const MAX_ENTRIES: usize = 8;
/// The cache file's name (its format's version in it).
const FILE: &str = "interpreters-v1.json";

/// The stat fields that change when a file or directory does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    mode: u32,
}

fn stamp(m: &std::fs::Metadata) -> Stamp {
    Stamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        mode: m.mode(),
    }
}

/// One input's state: `(path, followed, not followed)`; None where it does not exist.
type Input = (PathBuf, Option<Stamp>, Option<Stamp>);

fn input(p: &Path) -> Input {
    (
        p.to_path_buf(),
        std::fs::metadata(p).ok().map(|m| stamp(&m)),
        std::fs::symlink_metadata(p).ok().map(|m| stamp(&m)),
    )
}

/// Everything whose change could change a discovery answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Fingerprint {
    probe: u64,
    inputs: Vec<Input>,
}

/// One cached answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// The requested interpreter as resolved against PATH.
    path: PathBuf,
    fingerprint: Fingerprint,
    found: Interpreter,
    /// The candidate site directories the probe reported (present or not).
    site_dirs: Vec<PathBuf>,
}

/// FNV-1a: detects a changed probe or bootstrap (not an adversary: the file is the user's).
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn fingerprint(path: &Path, found: &Interpreter, site_dirs: &[PathBuf], probe: u64) -> Fingerprint {
    let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
    paths.insert(path.to_path_buf());
    paths.insert(found.executable.clone());
    for bin in [path.parent(), path.parent().and_then(Path::parent)]
        .into_iter()
        .flatten()
    {
        paths.insert(bin.join("pyvenv.cfg"));
    }
    for p in &found.prefixes {
        paths.insert(p.clone());
        paths.insert(p.join("pyvenv.cfg"));
    }
    for dir in found.path.iter().chain(site_dirs) {
        paths.insert(dir.clone());
        paths.insert(dir.join("sitecustomize.py"));
        paths.insert(dir.join("usercustomize.py"));
    }
    for dir in site_dirs {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().ends_with(".pth") {
                    paths.insert(e.path());
                }
            }
        }
    }
    Fingerprint {
        probe,
        inputs: paths.iter().map(|p| input(p)).collect(),
    }
}

/// The on-disk cache in one directory.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
    probe: u64,
}

impl DiskCache {
    /// The cache in `dir` for answers of the probe `probe` with the bootstrap `bootstrap`.
    #[must_use]
    pub fn new(dir: PathBuf, probe: &str, bootstrap: &str) -> DiskCache {
        DiskCache {
            dir,
            probe: fnv(&[probe, bootstrap]),
        }
    }

    /// The per-user default: `$XDG_CACHE_HOME/airlock`, or `$HOME/.cache/airlock`.
    #[must_use]
    pub fn default_dir() -> Option<PathBuf> {
        let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        std::env::var_os("XDG_CACHE_HOME")
            .and_then(abs)
            .or_else(|| {
                std::env::var_os("HOME")
                    .and_then(abs)
                    .map(|h| h.join(".cache"))
            })
            .map(|c| c.join("airlock"))
    }

    /// The answer for `path`, if one is cached and nothing it depends on changed.
    #[must_use]
    pub fn get(&self, path: &Path) -> Option<Interpreter> {
        let entry = self
            .load()
            .into_iter()
            .find(|e| e.path == path && e.fingerprint.probe == self.probe)?;
        let now = fingerprint(path, &entry.found, &entry.site_dirs, self.probe);
        (now == entry.fingerprint).then_some(entry.found)
    }

    /// Remember `found` for `path` (best effort: a cache that cannot be written is no cache).
    /// `site_dirs` are the candidate site directories the probe reported.
    pub fn put(&self, path: &Path, found: &Interpreter, site_dirs: &[PathBuf]) {
        let entry = Entry {
            path: path.to_path_buf(),
            fingerprint: fingerprint(path, found, site_dirs, self.probe),
            found: found.clone(),
            site_dirs: site_dirs.to_vec(),
        };
        let mut entries = self.load();
        entries.retain(|e| e.path != path);
        entries.insert(0, entry);
        entries.truncate(MAX_ENTRIES);
        let _ = self.store(&entries);
    }

    fn private_dir(&self) -> bool {
        std::fs::symlink_metadata(&self.dir).is_ok_and(|m| {
            m.is_dir() && m.uid() == effective_uid() && m.permissions().mode() & 0o077 == 0
        })
    }

    fn load(&self) -> Vec<Entry> {
        if !self.private_dir() {
            return Vec::new();
        }
        // The directory is the user's alone: nobody else can have put a link in it.
        let Ok(file) = std::fs::File::open(self.dir.join(FILE)) else {
            return Vec::new();
        };
        let ours = file.metadata().is_ok_and(|m| {
            m.is_file() && m.uid() == effective_uid() && m.permissions().mode() & 0o022 == 0
        });
        if !ours {
            return Vec::new();
        }
        let mut text = Vec::new();
        if file.take(MAX_FILE_BYTES).read_to_end(&mut text).is_err() {
            return Vec::new();
        }
        serde_json::from_slice(&text).unwrap_or_default()
    }

    fn store(&self, entries: &[Entry]) -> std::io::Result<()> {
        if !self.private_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)?;
            if !self.private_dir() {
                return Err(std::io::Error::other("cache directory is not private"));
            }
        }
        let text = serde_json::to_vec(entries).map_err(std::io::Error::other)?;
        let tmp = self.dir.join(format!(".{FILE}.{}.tmp", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = f.write_all(&text).and_then(|()| f.sync_data());
        drop(f);
        match written.and_then(|()| std::fs::rename(&tmp, self.dir.join(FILE))) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interp(dir: &Path) -> Interpreter {
        Interpreter {
            executable: dir.join("python"),
            prefixes: vec![dir.to_path_buf()],
            path: vec![dir.join("lib")],
            version: vec![3, 11, 0],
            bootstrap: "00".into(),
        }
    }

    struct Setup {
        t: tempfile::TempDir,
        home: tempfile::TempDir,
        cache: DiskCache,
        path: PathBuf,
        found: Interpreter,
        sites: Vec<PathBuf>,
    }

    /// An interpreter's tree in one directory, the cache in another, one answer stored.
    fn setup() -> Setup {
        let t = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("python"), "binary").unwrap();
        std::fs::create_dir(t.path().join("lib")).unwrap();
        std::fs::create_dir(t.path().join("site")).unwrap();
        let cache = DiskCache::new(home.path().join("cache"), "probe", "bootstrap");
        let found = interp(t.path());
        let sites = vec![t.path().join("site"), t.path().join("absent-site")];
        let path = t.path().join("python");
        cache.put(&path, &found, &sites);
        assert_eq!(
            cache.get(&path).as_ref(),
            Some(&found),
            "stored and unchanged"
        );
        Setup {
            t,
            home,
            cache,
            path,
            found,
            sites,
        }
    }

    #[test]
    fn an_unchanged_interpreter_is_served_from_disk() {
        let s = setup();
        // A new cache object (a new process) reads the same file.
        let again = DiskCache::new(s.home.path().join("cache"), "probe", "bootstrap");
        assert_eq!(again.get(&s.path), Some(s.found));
    }

    #[test]
    fn any_change_to_what_shaped_the_answer_is_a_miss() {
        type Change = fn(&Path);
        let changes: [(&str, Change); 6] = [
            ("binary replaced", |d| {
                std::fs::remove_file(d.join("python")).unwrap();
                std::fs::write(d.join("python"), "binary").unwrap();
            }),
            ("binary rewritten", |d| {
                std::fs::write(d.join("python"), "other!").unwrap()
            }),
            ("new .pth", |d| {
                std::fs::write(d.join("site/x.pth"), "/x").unwrap()
            }),
            ("site dir appears", |d| {
                std::fs::create_dir(d.join("absent-site")).unwrap()
            }),
            ("sitecustomize", |d| {
                std::fs::write(d.join("lib/sitecustomize.py"), "").unwrap()
            }),
            ("venv config", |d| {
                std::fs::write(d.join("pyvenv.cfg"), "home=/").unwrap()
            }),
        ];
        for (what, change) in changes {
            let s = setup();
            change(s.t.path());
            assert_eq!(s.cache.get(&s.path), None, "{what}");
        }
    }

    #[test]
    fn an_edited_pth_file_is_a_miss() {
        let s = setup();
        std::fs::write(s.t.path().join("site/a.pth"), "/a").unwrap();
        s.cache.put(&s.path, &s.found, &s.sites);
        assert!(s.cache.get(&s.path).is_some());
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(s.t.path().join("site/a.pth"), "/b").unwrap();
        assert_eq!(s.cache.get(&s.path), None);
    }

    #[test]
    fn another_probe_or_bootstrap_is_a_miss() {
        let s = setup();
        let other = DiskCache::new(s.home.path().join("cache"), "probe", "bootstrap v2");
        assert_eq!(other.get(&s.path), None);
    }

    #[test]
    fn a_file_others_can_write_is_ignored() {
        let s = setup();
        let dir = s.home.path().join("cache");
        let file = dir.join(FILE);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(s.cache.get(&s.path), None);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(s.cache.get(&s.path).is_some());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(s.cache.get(&s.path), None, "a directory others can read");
    }
}
