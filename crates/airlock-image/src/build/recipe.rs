//! A preset made concrete: which builder, which Debian suite, which apt sources, the exact
//! commands, and the key that names the result (the SHA-256 of all of it, so a cached build is
//! reused only for the very same recipe).
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::preset::{Preset, FINISH};
use super::tool::Builder;
use crate::digest::Digest;

/// The suite used when the host is not Debian (or Ubuntu) and none is asked for.
pub const DEFAULT_SUITE: &str = "bookworm";
/// Paths no preset needs at run time, left out of the image: documentation, and the C
/// compiler and headers that bookworm's python3-scipy pulls in through python3-pythran (a
/// compiler for building extensions), about 300 MB of a 1.2 GB root.
const LEFT_OUT: &[&str] = &[
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/locale/*",
    "/usr/include/*",
    "/usr/lib/gcc/*",
    "/usr/bin/*-lto-dump-*",
];
/// Most bytes read from a host configuration file (`/etc/os-release`, apt sources).
const MAX_HOST_FILE: u64 = 256 * 1024;

/// Everything that decides what a build makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// What to install.
    pub preset: Preset,
    /// With what.
    pub builder: Builder,
    /// The Debian (or Ubuntu) suite: `bookworm`, `trixie`, `noble`, ...
    pub suite: String,
    /// The host's apt sources (mmdebstrap, when the suite is the host's own); empty: the
    /// builder's default mirror.
    pub sources: Vec<(PathBuf, String)>,
}

impl Recipe {
    /// The recipe for `preset` with `builder`: `suite`, else the host's own suite when the host
    /// is Debian or Ubuntu, else [`DEFAULT_SUITE`]. mmdebstrap on the host's own suite uses the
    /// host's apt sources (its mirror and proxy settings), as `apt` on the host does.
    #[must_use]
    pub fn new(preset: Preset, builder: Builder, suite: Option<&str>) -> Recipe {
        let host = host_suite();
        // A container builder's base is `debian:<suite>-slim`: the host's suite only if Debian.
        let usable = host
            .clone()
            .filter(|(id, _)| builder == Builder::Mmdebstrap || id == "debian")
            .map(|(_, suite)| suite);
        let suite = suite
            .map(str::to_owned)
            .or(usable)
            .unwrap_or_else(|| DEFAULT_SUITE.to_owned());
        let host = host.map(|(_, suite)| suite);
        let sources = if builder == Builder::Mmdebstrap && host.as_deref() == Some(&suite) {
            host_sources()
        } else {
            Vec::new()
        };
        Recipe {
            preset,
            builder,
            suite,
            sources,
        }
    }

    /// 16 hex digits naming this recipe: the builder's arguments, the Containerfile and the
    /// sources' contents.
    #[must_use]
    pub fn key(&self) -> String {
        let mut text = format!("airlock preset recipe 1\n{}\n", self.builder);
        for a in self.mmdebstrap_args(Path::new("OUT")) {
            text.push_str(&a);
            text.push('\n');
        }
        text.push_str(&self.containerfile());
        for (p, body) in &self.sources {
            text.push_str(&format!("{}\n{body}\n", p.display()));
        }
        Digest::of(text.as_bytes()).hex()[..16].to_owned()
    }

    /// mmdebstrap's arguments, writing a root tarball to `out`.
    #[must_use]
    pub fn mmdebstrap_args(&self, out: &Path) -> Vec<String> {
        let mut a = vec![
            "--variant=essential".to_owned(),
            format!("--include={}", self.preset.packages.join(",")),
            // Recommends would bring gcc, boost and -dev headers (1.2 GB instead of ~500 MB).
            "--aptopt=APT::Install-Recommends \"false\"".to_owned(),
        ];
        for p in LEFT_OUT {
            a.push(format!("--dpkgopt=path-exclude={p}"));
        }
        a.push(format!("--customize-hook=chroot \"$1\" sh -c '{FINISH}'"));
        a.push(self.suite.clone());
        a.push(out.display().to_string());
        a.extend(self.sources.iter().map(|(p, _)| p.display().to_string()));
        a
    }

    /// The Containerfile podman and buildah build.
    #[must_use]
    pub fn containerfile(&self) -> String {
        format!(
            "FROM docker.io/library/debian:{suite}-slim\n\
             RUN apt-get update \\\n \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {pkgs} \\\n \
             && rm -rf /var/lib/apt/lists/* {left_out} \\\n \
             && {FINISH}\n\
             ENV LANG=C.UTF-8\n",
            suite = self.suite,
            pkgs = self.preset.packages.join(" "),
            left_out = LEFT_OUT.join(" "),
        )
    }

    /// The commands that write the image to `out` (an OCI archive or a root tarball), given the
    /// builder's program and a scratch directory of the build's own.
    #[must_use]
    pub fn commands(&self, program: &Path, out: &Path, scratch: &Path) -> Vec<Command> {
        let tag = format!(
            "localhost/airlock-preset-{}:{}",
            self.preset.name,
            self.key()
        );
        let file = scratch.join("Containerfile");
        let cmd = |args: &[&str]| {
            let mut c = Command::new(program);
            c.args(args);
            c
        };
        let (f, s, o) = (
            file.display().to_string(),
            scratch.display().to_string(),
            out.display().to_string(),
        );
        match self.builder {
            Builder::Mmdebstrap => {
                let mut c = Command::new(program);
                c.args(self.mmdebstrap_args(out));
                vec![c]
            }
            Builder::Podman => vec![
                cmd(&["build", "--tag", &tag, "--file", &f, &s]),
                cmd(&["save", "--format", "oci-archive", "--output", &o, &tag]),
            ],
            Builder::Buildah => vec![
                cmd(&["build", "--tag", &tag, "--file", &f, &s]),
                cmd(&["push", &tag, &format!("oci-archive:{o}")]),
            ],
        }
    }

    /// The command that removes what the container builders left in their own store.
    #[must_use]
    pub fn cleanup(&self, program: &Path) -> Option<Command> {
        let tag = format!(
            "localhost/airlock-preset-{}:{}",
            self.preset.name,
            self.key()
        );
        (self.builder != Builder::Mmdebstrap).then(|| {
            let mut c = Command::new(program);
            c.args(["rmi", &tag]);
            c
        })
    }
}

/// A small host file, read whole up to [`MAX_HOST_FILE`].
fn read_small(p: &Path) -> Option<String> {
    let mut s = String::new();
    std::fs::File::open(p)
        .ok()?
        .take(MAX_HOST_FILE)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// `ID` and `VERSION_CODENAME` of a Debian or Ubuntu (or Debian-like) host.
fn host_suite() -> Option<(String, String)> {
    let text = read_small(Path::new("/etc/os-release"))?;
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .map(|v| v.trim_matches('"').to_owned())
    };
    let id = field("ID").unwrap_or_default();
    let like = field("ID_LIKE").unwrap_or_default();
    let debian = ["debian", "ubuntu"].contains(&id.as_str()) || like.contains("debian");
    field("VERSION_CODENAME")
        .filter(|c| debian && !c.is_empty())
        .map(|c| (id, c))
}

/// The host's apt sources (`sources.list`, `sources.list.d/*.list` and `*.sources`), sorted.
fn host_sources() -> Vec<(PathBuf, String)> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(d) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = d
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "list" || x == "sources"))
            .collect();
        more.sort();
        files.extend(more);
    }
    files
        .into_iter()
        .filter_map(|p| {
            read_small(&p)
                .filter(|s| !s.trim().is_empty())
                .map(|s| (p, s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::preset::PYTHON_DATA;

    #[test]
    fn the_key_changes_with_the_packages_the_suite_and_the_builder() {
        let r = Recipe::new(PYTHON_DATA, Builder::Mmdebstrap, Some("bookworm"));
        assert_eq!(r.key(), r.clone().key());
        let mut other = r.clone();
        other.suite = "trixie".into();
        assert_ne!(r.key(), other.key());
        let mut other = r.clone();
        other.builder = Builder::Podman;
        assert_ne!(r.key(), other.key());
        let mut other = r.clone();
        other.preset.packages = &["python3"];
        assert_ne!(r.key(), other.key());
    }

    #[test]
    fn every_package_reaches_both_recipes() {
        let r = Recipe::new(PYTHON_DATA, Builder::Podman, Some("bookworm"));
        let args = r.mmdebstrap_args(Path::new("/x.tar")).join(" ");
        for p in PYTHON_DATA.packages {
            assert!(args.contains(p) && r.containerfile().contains(p), "{p}");
        }
        assert!(r
            .containerfile()
            .starts_with("FROM docker.io/library/debian:bookworm-slim"));
    }
}
