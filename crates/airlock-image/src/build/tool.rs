//! Which building tool is on `PATH`: mmdebstrap (Debian packages from the apt mirror, no
//! container registry) first, then podman, then buildah (both from a Debian base image).
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{ImageError, Result};

/// A tool that builds a preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builder {
    /// `mmdebstrap`: a root tarball from the apt mirror.
    Mmdebstrap,
    /// `podman build` from a Debian base image, saved as an OCI archive.
    Podman,
    /// `buildah build`, pushed to an OCI archive.
    Buildah,
}

impl Builder {
    /// In the order they are tried.
    pub const ALL: [Builder; 3] = [Builder::Mmdebstrap, Builder::Podman, Builder::Buildah];

    /// The program's name.
    #[must_use]
    pub fn program(self) -> &'static str {
        match self {
            Builder::Mmdebstrap => "mmdebstrap",
            Builder::Podman => "podman",
            Builder::Buildah => "buildah",
        }
    }

    /// How to get it, and what it builds from.
    #[must_use]
    pub fn how_to_install(self) -> String {
        let from = match self {
            Builder::Mmdebstrap => "Debian packages from the apt mirror, no container registry",
            Builder::Podman | Builder::Buildah => "pulls a Debian base image from docker.io",
        };
        format!("{0}: `apt-get install {0}` ({from})", self.program())
    }

    /// The builder named `name` (`mmdebstrap`, `podman`, `buildah`).
    pub fn parse(name: &str) -> Result<Builder> {
        Builder::ALL
            .into_iter()
            .find(|b| b.program() == name)
            .ok_or_else(|| ImageError::UnknownBuilder(name.to_owned()))
    }
}

impl std::fmt::Display for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.program())
    }
}

/// The builder to use and where its program is: `wanted`, or the first of [`Builder::ALL`] on
/// `path` (the value of `PATH`). None there is an error naming every tool and how to get it.
pub fn choose(wanted: Option<Builder>, path: Option<&OsStr>) -> Result<(Builder, PathBuf)> {
    let candidates: Vec<Builder> = wanted.map_or(Builder::ALL.to_vec(), |b| vec![b]);
    for b in &candidates {
        if let Some(p) = which(b.program(), path) {
            return Ok((*b, p));
        }
    }
    let names: Vec<&str> = candidates.iter().map(|b| b.program()).collect();
    let how: Vec<String> = candidates.iter().map(|b| b.how_to_install()).collect();
    Err(ImageError::NoBuilder {
        tried: names.join(", "),
        install: how.join("; "),
    })
}

/// The first executable file called `name` in the directories of `path`.
fn which(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_on_path_names_every_tool_and_how_to_install_it() {
        let empty = tempfile::tempdir().unwrap();
        let e = choose(None, Some(empty.path().as_os_str()))
            .unwrap_err()
            .to_string();
        for tool in ["mmdebstrap", "podman", "buildah", "apt-get install"] {
            assert!(e.contains(tool), "{tool} not in: {e}");
        }
    }

    #[test]
    fn the_first_present_tool_wins_and_a_wanted_one_must_be_there() {
        let dir = tempfile::tempdir().unwrap();
        let podman = dir.path().join("podman");
        std::fs::write(&podman, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&podman, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = Some(dir.path().as_os_str());
        assert_eq!(choose(None, path).unwrap(), (Builder::Podman, podman));
        let e = choose(Some(Builder::Mmdebstrap), path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mmdebstrap") && !e.contains("podman,"), "{e}");
    }
}
