//! `FileSystemSink`: lands artifacts under a host directory as a guarantee, not a check.
//!
//! The root is opened once, as a directory handle. Each delivery walks the artifact name's
//! parents from that handle one segment at a time (`O_NOFOLLOW | O_DIRECTORY`, creating
//! missing ones `0700`), so a symlink or a non-directory anywhere in the way is refused
//! (`SandboxLandingNotConfined`) and one swapped in mid-walk makes the walk fail, never
//! redirect it. The leaf is an exclusive create (`O_CREAT | O_EXCL | O_NOFOLLOW`): anything
//! already there, a dangling link included, is refused (`SandboxLandingExists`) with nothing
//! taken in between. With [`Existing::Replace`] the bytes go to a fresh exclusive temp file
//! renamed over the leaf: a link there is replaced, never written through, and a directory is
//! never replaced. Errors name the artifact, never a host path.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use airlock_jail::dirfd::{DirFd, FileKind};
use airlock_router::sinks::{Artifact, LandedArtifact, OutputSink, SinkError};
use async_trait::async_trait;

/// What to do when the destination is occupied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refuse (the default: a root more than one conversation lands in is a channel).
    Refuse,
    /// Replace a regular file (a workload landing one stable name).
    Replace,
}

/// A sink landing under one host directory.
#[derive(Debug, Clone)]
pub struct FileSystemSink {
    root: Arc<DirFd>,
    existing: Existing,
}

const EEXIST: i32 = 17;
const ENOENT: i32 = 2;

impl FileSystemSink {
    /// A sink landing under `root` (which must exist and not be a symlink), refusing occupied
    /// destinations.
    pub fn new(root: &Path) -> std::io::Result<FileSystemSink> {
        Ok(FileSystemSink {
            root: Arc::new(DirFd::open(root)?),
            existing: Existing::Refuse,
        })
    }

    /// Opts in to replacing a regular file at the destination.
    #[must_use]
    pub fn replace_existing(mut self) -> Self {
        self.existing = Existing::Replace;
        self
    }
}

fn refused(name: &str, e: &std::io::Error) -> SinkError {
    SinkError::Refused {
        name: name.to_owned(),
        reason: format!("{}", e.kind()),
    }
}

fn not_confined(name: &str) -> SinkError {
    SinkError::NotConfined {
        name: name.to_owned(),
    }
}

fn land(root: &DirFd, artifact: &Artifact, existing: Existing) -> Result<(), SinkError> {
    let name = artifact.name.as_str();
    let segs: Vec<&str> = artifact.name.segments().collect();
    let Some((leaf, parents)) = segs.split_last() else {
        return Err(not_confined(name));
    };
    let mut dir = root.reopen().map_err(|e| refused(name, &e))?;
    for seg in parents {
        match dir.mkdir_at(seg, 0o700) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(EEXIST) => {}
            Err(e) => return Err(refused(name, &e)),
        }
        // A link or a file here (planted before, or swapped in since the mkdir) fails.
        dir = dir.open_dir_at(seg).map_err(|_| not_confined(name))?;
    }
    match existing {
        Existing::Refuse => {
            let mut f = dir.create_at(leaf, 0o600).map_err(|e| {
                if e.raw_os_error() == Some(EEXIST) {
                    SinkError::Exists {
                        name: name.to_owned(),
                    }
                } else {
                    refused(name, &e)
                }
            })?;
            if let Err(e) = f.write_all(&artifact.bytes).and_then(|()| f.sync_data()) {
                drop(f);
                let _ = dir.unlink_at(leaf);
                return Err(refused(name, &e));
            }
            Ok(())
        }
        Existing::Replace => {
            match dir.stat_at(leaf) {
                Ok(m) if m.kind == FileKind::Directory => {
                    return Err(SinkError::Exists {
                        name: name.to_owned(),
                    })
                }
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(ENOENT) => {}
                Err(e) => return Err(refused(name, &e)),
            }
            let tmp = temp_name().map_err(|e| refused(name, &e))?;
            let mut f = dir.create_at(&tmp, 0o600).map_err(|e| refused(name, &e))?;
            let written = f.write_all(&artifact.bytes).and_then(|()| f.sync_data());
            drop(f);
            if let Err(e) = written.and_then(|()| dir.rename_at(&tmp, leaf, false)) {
                let _ = dir.unlink_at(&tmp);
                return Err(refused(name, &e));
            }
            Ok(())
        }
    }
}

fn temp_name() -> std::io::Result<String> {
    let mut buf = [0u8; 8];
    getrandom::fill(&mut buf)?;
    Ok(format!(".airlock-landing-{}", hex::encode(buf)))
}

#[async_trait]
impl OutputSink for FileSystemSink {
    async fn deliver(&self, artifact: &Artifact) -> Result<LandedArtifact, SinkError> {
        let root = Arc::clone(&self.root);
        let a = artifact.clone();
        let existing = self.existing;
        tokio::task::spawn_blocking(move || land(&root, &a, existing))
            .await
            .map_err(|e| SinkError::Refused {
                name: artifact.name.to_string(),
                reason: format!("landing task failed: {e}"),
            })??;
        Ok(LandedArtifact {
            name: artifact.name.clone(),
            media_type: artifact.media_type.clone(),
            size: artifact.bytes.len() as u64,
            display: format!(
                "landed {} ({}, {} bytes)",
                artifact.name,
                artifact.media_type,
                artifact.bytes.len()
            ),
            handle: artifact.name.to_string(),
        })
    }
}
