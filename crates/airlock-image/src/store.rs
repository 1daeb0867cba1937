//! The store: `roots/<id>/` (unpacked, content-addressed roots, shared by every image and
//! sandbox that uses them), `images/<name>.json` (names), `notes/<id>/` (what airlock learnt
//! about a root), `tmp/` (imports under way). One import or removal at a time (`lock`).
//!
//! An import is unpacked into `tmp/` and published by one rename; a failed one leaves nothing
//! (its staging is removed, and any left by a killed import is removed by the next).
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use airlock_jail::dirfd::DirFd;

use crate::bounds::{Bounds, Budget};
use crate::config::{ImageConfig, ParsedConfig};
use crate::digest::{chain_id, Digest, Hashing};
use crate::error::{ImageError, Result};
use crate::finalize::finalize;
use crate::image::{valid_name, write_atomic, Image, Record, MAX_RECORD_BYTES};
use crate::source::{self, Format, Plan};
use crate::unpack::{apply_layer, Applier, Report};

/// Most images a store lists.
const MAX_IMAGES: usize = 10_000;
/// Removal walks are bounded too (far above any root the import bounds allow).
const MAX_REMOVE_ENTRIES: usize = 50_000_000;

/// A store directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    dir: PathBuf,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The record written.
    pub record: Record,
    /// Whether the root was already in the store (nothing was unpacked).
    pub reused: bool,
}

/// The unpacked result of one import, before it is published.
struct Unpacked {
    format: Format,
    id: Digest,
    config: ImageConfig,
    layers: usize,
    report: Report,
    bytes: u64,
    entries: u64,
    /// The staging directory holding the root (None: the store has it already).
    root: Option<PathBuf>,
}

fn mkdir(p: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(ImageError::io(format!("create {}", p.display())))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Store {
    /// The store at `dir` (created on first import).
    #[must_use]
    pub fn open(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// `$AIRLOCK_IMAGE_DIR`; else `/var/lib/airlock/images` for root; else
    /// `$XDG_DATA_HOME/airlock/images` or `~/.local/share/airlock/images`.
    #[must_use]
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("AIRLOCK_IMAGE_DIR").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(d));
        }
        if airlock_jail::identity::effective_root() {
            return Some(PathBuf::from("/var/lib/airlock/images"));
        }
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|d| Path::new(d).is_absolute())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))?;
        Some(data.join("airlock/images"))
    }

    /// The store directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes the store's lock, first checking that the store and its directories are plain
    /// directories of the caller's own: every write below goes by path, and a link planted by
    /// another user (`lock -> /etc/shadow`, `tmp -> /`) must not be followed by, say, root
    /// importing into that user's store.
    fn lock(&self) -> Result<File> {
        let uid = airlock_jail::identity::effective_uid();
        own_dir(&self.dir, uid, true)?;
        for sub in ["roots", "images", "notes", "tmp"] {
            mkdir(&self.dir.join(sub))?;
            own_dir(&self.dir.join(sub), uid, false)?;
        }
        let path = self.dir.join("lock");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .mode(0o600)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => not_own(&path, u32::MAX, uid),
                _ => ImageError::io(format!("open {}", path.display()))(e),
            })?;
        let meta = f.metadata().map_err(ImageError::io("stat the lock"))?;
        if !meta.is_file() || meta.uid() != uid {
            return Err(not_own(&path, meta.uid(), uid));
        }
        f.lock().map_err(ImageError::io("lock the store"))?;
        Ok(f)
    }

    /// Imports the image at `src` under `name` (replacing what the name named before).
    pub fn import(&self, src: &Path, name: &str, bounds: Bounds) -> Result<Imported> {
        self.import_labelled(src, name, bounds, &src.display().to_string())
    }

    /// [`Store::import`], recording `source` as where the image came from (a built preset's
    /// archive is a temporary file; its record says which preset and recipe it was).
    pub fn import_labelled(
        &self,
        src: &Path,
        name: &str,
        bounds: Bounds,
        source: &str,
    ) -> Result<Imported> {
        if !valid_name(name) {
            return Err(ImageError::BadName(name.into()));
        }
        let _lock = self.lock()?;
        let tmp = DirFd::open(&self.dir.join("tmp")).map_err(ImageError::io("open tmp"))?;
        clear_dir(&tmp)?;
        let staging = self
            .dir
            .join("tmp")
            .join(format!("import-{}", std::process::id()));
        mkdir(&staging)?;
        let result = self.unpack(src, &staging, bounds);
        let published = result.and_then(|u| self.publish(source, name, u));
        let _ = remove(&tmp, OsStr::new(staging.file_name().unwrap_or_default()));
        published
    }

    fn unpack(&self, src: &Path, staging: &Path, bounds: Bounds) -> Result<Unpacked> {
        let src =
            std::fs::canonicalize(src).map_err(ImageError::io(format!("{}", src.display())))?;
        let meta = std::fs::metadata(&src).map_err(ImageError::io(format!("{}", src.display())))?;
        let stage = DirFd::open(staging).map_err(ImageError::io("open staging"))?;
        let mut budget = Budget::new(bounds);
        if meta.is_dir() {
            let dir =
                DirFd::open(&src).map_err(ImageError::io(format!("open {}", src.display())))?;
            if let Some(plan) = source::plan(&dir)? {
                return self.unpack_plan(&dir, plan, &stage, staging, budget);
            }
            let root = make_root(&stage, "root")?;
            let mut applier = Applier::new(&root);
            let id = source::dir::apply_dir(&dir, &mut applier, &mut budget)?;
            let at = staging.join("root");
            return done(
                Format::Directory,
                id,
                ImageConfig::default(),
                applier,
                &root,
                at,
                &budget,
            );
        }
        if !meta.is_file() {
            return Err(ImageError::format(&src, "neither a directory nor a file"));
        }
        // An archive: unpacked as it is, then looked at.
        let outer = make_root(&stage, "outer")?;
        let mut applier = Applier::new(&outer);
        let file = File::open(&src).map_err(ImageError::io(format!("open {}", src.display())))?;
        let id =
            apply_layer(file, &mut applier, &mut budget).map_err(|e| not_an_archive(&src, e))?;
        if let Some(plan) = source::plan(&outer)? {
            drop(applier);
            return self.unpack_plan(&outer, plan, &stage, staging, Budget::new(bounds));
        }
        let at = staging.join("outer");
        done(
            Format::RootTar,
            id,
            ImageConfig::default(),
            applier,
            &outer,
            at,
            &budget,
        )
    }

    fn unpack_plan(
        &self,
        layout: &DirFd,
        plan: Plan,
        stage: &DirFd,
        staging: &Path,
        mut budget: Budget,
    ) -> Result<Unpacked> {
        let Plan {
            format,
            config: ParsedConfig { config, diff_ids },
            layers,
        } = plan;
        let id = chain_id(&diff_ids).ok_or_else(|| ImageError::format(staging, "no layers"))?;
        if self.has_root(&id) {
            return Ok(Unpacked {
                format,
                id,
                config,
                layers: layers.len(),
                report: Report::default(),
                bytes: 0,
                entries: 0,
                root: None,
            });
        }
        let root = make_root(stage, "root")?;
        let mut applier = Applier::new(&root);
        for layer in &layers {
            let mut raw = Hashing::new(source::open_file(layout, &layer.path)?);
            let diff = apply_layer(&mut raw, &mut applier, &mut budget)?;
            check(&layer.diff_id, &diff, "layer (uncompressed)")?;
            if let Some(blob) = &layer.blob {
                let got = raw.finish(0).map_err(ImageError::io("read layer blob"))?;
                check(blob, &got, "layer blob")?;
            }
        }
        let mut u = done(
            format,
            id,
            config,
            applier,
            &root,
            staging.join("root"),
            &budget,
        )?;
        u.layers = layers.len();
        Ok(u)
    }

    fn has_root(&self, id: &Digest) -> bool {
        self.dir.join("roots").join(id.hex()).is_dir()
    }

    fn publish(&self, source: &str, name: &str, u: Unpacked) -> Result<Imported> {
        let reused = match &u.root {
            Some(staged) if !self.has_root(&u.id) => {
                let to = self.dir.join("roots").join(u.id.hex());
                std::fs::rename(staged, &to)
                    .map_err(ImageError::io(format!("publish {}", to.display())))?;
                false
            }
            _ => true,
        };
        let record = Record {
            name: name.to_owned(),
            id: u.id.hex().to_owned(),
            format: u.format,
            source: source.to_owned(),
            config: u.config,
            imported_at: now(),
            bytes: u.bytes,
            entries: u.entries,
            layers: u.layers,
            report: u.report,
        };
        let json = serde_json::to_vec_pretty(&record).map_err(|e| ImageError::Json {
            what: "record".into(),
            why: e.to_string(),
        })?;
        let before = self.record(name).ok();
        write_atomic(&self.record_path(name), &json)?;
        // The root the name named before goes with it, unless another name still uses it.
        if let Some(old) = before.filter(|old| old.id != record.id) {
            self.drop_root_if_unused(&old.id)?;
        }
        Ok(Imported { record, reused })
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.dir.join("images").join(format!("{name}.json"))
    }

    /// The record of `name`.
    pub fn record(&self, name: &str) -> Result<Record> {
        if !valid_name(name) {
            return Err(ImageError::BadName(name.into()));
        }
        let mut bytes = Vec::new();
        match File::open(self.record_path(name)) {
            Ok(f) => f
                .take(MAX_RECORD_BYTES)
                .read_to_end(&mut bytes)
                .map_err(ImageError::io(format!("read the record of {name}")))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ImageError::NotFound(name.into()))
            }
            Err(e) => return Err(ImageError::io(format!("read the record of {name}"))(e)),
        };
        let r: Record = serde_json::from_slice(&bytes).map_err(|e| ImageError::Json {
            what: format!("the record of {name}"),
            why: e.to_string(),
        })?;
        if Digest::from_hex(&r.id).is_none() || r.name != name {
            return Err(ImageError::Json {
                what: format!("the record of {name}"),
                why: "bad id or name".into(),
            });
        }
        Ok(r)
    }

    /// The image `name`, ready for a sandbox.
    pub fn get(&self, name: &str) -> Result<Image> {
        let r = self.record(name)?;
        let root = self.dir.join("roots").join(&r.id);
        if !root.is_dir() {
            return Err(ImageError::NotFound(format!(
                "{name} (its root is missing)"
            )));
        }
        Ok(Image {
            name: r.name,
            notes: self.dir.join("notes").join(&r.id),
            id: r.id,
            root,
            config: r.config,
        })
    }

    /// Every image, by name.
    pub fn list(&self) -> Result<Vec<Record>> {
        let names = match std::fs::read_dir(self.dir.join("images")) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ImageError::io("list images")(e)),
        };
        let mut out = Vec::new();
        for entry in names.take(MAX_IMAGES) {
            let entry = entry.map_err(ImageError::io("list images"))?;
            let file = entry.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_suffix(".json").filter(|n| valid_name(n)) {
                out.push(self.record(name)?);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Removes `name`; its root too when no other name uses it (returns whether it did).
    pub fn remove(&self, name: &str) -> Result<bool> {
        let _lock = self.lock()?;
        let r = self.record(name)?;
        std::fs::remove_file(self.record_path(name))
            .map_err(ImageError::io(format!("remove the record of {name}")))?;
        self.drop_root_if_unused(&r.id)
    }

    /// Removes the root `id` (and its notes) when no name uses it; returns whether it did.
    /// The caller holds the lock.
    fn drop_root_if_unused(&self, id: &str) -> Result<bool> {
        if self.list()?.iter().any(|o| o.id == id) {
            return Ok(false);
        }
        for sub in ["roots", "notes"] {
            let dir = DirFd::open(&self.dir.join(sub)).map_err(ImageError::io("open store"))?;
            remove(&dir, OsStr::new(id))?;
        }
        Ok(true)
    }
}

fn not_own(path: &Path, owner: u32, uid: u32) -> ImageError {
    ImageError::NotOwnStore {
        path: path.to_path_buf(),
        owner,
        uid,
    }
}

/// Refuses `dir` unless it is a directory (not a link to one) owned by `uid`; a missing one is
/// fine when `may_be_missing` (it is created owner-only).
fn own_dir(dir: &Path, uid: u32, may_be_missing: bool) -> Result<()> {
    // Without a trailing `/`, which would make lstat follow a final link.
    let dir: PathBuf = dir.components().collect();
    let dir = dir.as_path();
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() && m.uid() == uid => Ok(()),
        Ok(m) if m.is_dir() => Err(not_own(dir, m.uid(), uid)),
        Ok(_) => Err(not_own(dir, u32::MAX, uid)),
        Err(e) if may_be_missing && e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ImageError::io(format!("stat {}", dir.display()))(e)),
    }
}

fn make_root(stage: &DirFd, name: &str) -> Result<DirFd> {
    stage
        .mkdir_at(name, 0o700)
        .and_then(|()| stage.open_dir_at(name))
        .map_err(ImageError::io("create the staging root"))
}

fn done(
    format: Format,
    id: Digest,
    config: ImageConfig,
    applier: Applier<'_>,
    root: &DirFd,
    at: PathBuf,
    budget: &Budget,
) -> Result<Unpacked> {
    let report = applier.finish()?;
    finalize(root)?;
    Ok(Unpacked {
        format,
        id,
        config,
        layers: 1,
        report,
        bytes: budget.bytes(),
        entries: budget.entries(),
        root: Some(at),
    })
}

fn check(want: &Digest, got: &Digest, what: &str) -> Result<()> {
    if want == got {
        return Ok(());
    }
    Err(ImageError::Digest {
        what: what.into(),
        expected: want.to_string(),
        actual: got.to_string(),
    })
}

/// A file that is not a tar archive says so, rather than "bad header checksum".
fn not_an_archive(src: &Path, e: ImageError) -> ImageError {
    match e {
        ImageError::Tar(why) if why.contains("checksum") => ImageError::format(
            src,
            "not a tar archive (an OCI or Docker archive, or a root tarball), nor a directory",
        ),
        other => other,
    }
}

/// Removes everything in `dir`.
fn clear_dir(dir: &DirFd) -> Result<()> {
    for name in dir
        .entries(MAX_IMAGES)
        .map_err(ImageError::io("list tmp"))?
    {
        remove(dir, &name)?;
    }
    Ok(())
}

fn remove(dir: &DirFd, name: &OsStr) -> Result<()> {
    let mut left = MAX_REMOVE_ENTRIES;
    dir.remove_tree_at(name, &mut left)
        .map_err(ImageError::io(format!("remove {}", name.to_string_lossy())))
}
