//! `airlock image build --preset NAME`: a ready-made image from the tools already on the
//! machine. mmdebstrap (Debian packages from the apt mirror, no container registry) or
//! podman/buildah (a Debian base image) writes a root tarball or an OCI archive; the caller
//! imports it into the store like any other image. With a [`Cache`], a recipe is built once
//! and its archive reused.
mod cache;
mod preset;
mod recipe;
mod tool;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

pub use cache::Cache;
pub use preset::{names, preset, Preset, PRESETS, PYTHON_DATA};
pub use recipe::{Recipe, DEFAULT_SUITE};
pub use tool::{choose, Builder};

use crate::error::{ImageError, Result};

/// An archive ready to import.
#[derive(Debug)]
pub struct Built {
    /// The archive.
    pub path: PathBuf,
    /// Whether it came from the cache (nothing was built).
    pub cached: bool,
    /// Seconds the build took (0 from the cache).
    pub seconds: f64,
    /// The build's own directory, removed on drop (None: the archive is the cache's).
    _scratch: Option<tempfile::TempDir>,
}

/// The archive of `recipe`: the cache's when it holds one, else built with `program` (the
/// builder's output goes to this process's stderr) and, with a cache, kept there.
pub fn make(recipe: &Recipe, program: &Path, cache: Option<&Cache>) -> Result<Built> {
    let (name, key) = (recipe.preset.name, recipe.key());
    if let Some(path) = cache.and_then(|c| c.get(name, &key)) {
        return Ok(Built {
            path,
            cached: true,
            seconds: 0.0,
            _scratch: None,
        });
    }
    let scratch = match cache {
        Some(c) => c.scratch()?,
        None => tempfile::Builder::new()
            .prefix("airlock-build-")
            .tempdir()
            .map_err(ImageError::io("a build directory"))?,
    };
    let out = scratch.path().join(format!("{name}.tar"));
    std::fs::write(scratch.path().join("Containerfile"), recipe.containerfile())
        .map_err(ImageError::io("write the Containerfile"))?;
    let started = Instant::now();
    let ran = run_all(recipe, program, &out, scratch.path());
    if let Some(mut c) = recipe.cleanup(program) {
        let _ = c.stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
    ran?;
    let seconds = started.elapsed().as_secs_f64();
    let path = match cache {
        Some(c) => c.keep(&out, name, &key)?,
        None => out,
    };
    Ok(Built {
        path,
        cached: false,
        seconds,
        _scratch: Some(scratch),
    })
}

/// Runs the recipe's commands in order, their output on this process's stderr.
fn run_all(recipe: &Recipe, program: &Path, out: &Path, scratch: &Path) -> Result<()> {
    for mut c in recipe.commands(program, out, scratch) {
        let to_stderr = || {
            std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map(Stdio::from)
                .map_err(ImageError::io("duplicate stderr"))
        };
        c.stdin(Stdio::null())
            .stdout(to_stderr()?)
            .stderr(to_stderr()?);
        let status = c
            .status()
            .map_err(ImageError::io(format!("run {}", program.display())))?;
        if !status.success() {
            return Err(ImageError::BuildFailed {
                tool: recipe.builder.program(),
                status: status.to_string(),
                hint: hint(recipe),
            });
        }
    }
    if std::fs::metadata(out).is_ok_and(|m| m.is_file() && m.len() > 0) {
        Ok(())
    } else {
        Err(ImageError::BuildFailed {
            tool: recipe.builder.program(),
            status: format!("it wrote no {}", out.display()),
            hint: hint(recipe),
        })
    }
}

/// What usually stands in a builder's way.
fn hint(recipe: &Recipe) -> String {
    match recipe.builder {
        Builder::Mmdebstrap => format!(
            "it needs the Debian mirror for {} (or the host's apt sources), and, run as a user, \
             a subordinate id range (/etc/subuid) for its unshare mode; or run it as root",
            recipe.suite
        ),
        Builder::Podman | Builder::Buildah => format!(
            "it pulls docker.io/library/debian:{}-slim and runs apt-get in it: it needs \
             that registry and the Debian mirror; or install mmdebstrap (no registry)",
            recipe.suite
        ),
    }
}
