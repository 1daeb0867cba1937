//! `airlock image build|import|ls|rm`: the local image store (airlock-image).
use std::path::PathBuf;
use std::process::ExitCode;

use airlock_image::{Bounds, Store};
use anyhow::Context;

/// Options of `airlock image`.
#[derive(Debug, clap::Args)]
pub struct ImageOpts {
    /// The store [default: $AIRLOCK_IMAGE_DIR, /var/lib/airlock/images as root, else
    /// ~/.local/share/airlock/images].
    #[arg(long, global = true, value_name = "DIR")]
    pub image_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: ImageCommand,
}

/// What to do with the store.
#[derive(Debug, clap::Subcommand)]
pub enum ImageCommand {
    /// Import an OCI layout or archive, a Docker archive, a root tarball or a root directory.
    Import {
        /// What to import.
        path: PathBuf,
        /// The name to give it [default: the file name without archive extensions].
        #[arg(long)]
        name: Option<String>,
        /// Most bytes read from the image's (decompressed) layers, together.
        #[arg(long, default_value_t = Bounds::default().max_bytes)]
        max_bytes: u64,
        /// Most entries (files, directories, links) in the image's layers, together.
        #[arg(long, default_value_t = Bounds::default().max_entries)]
        max_entries: u64,
        /// Print the record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build a ready image from a preset and import it (mmdebstrap, podman or buildah).
    Build(crate::image_build::BuildOpts),
    /// List the images.
    Ls {
        /// Print JSON (one array of records).
        #[arg(long)]
        json: bool,
    },
    /// Remove an image (its root too, when no other name uses it).
    Rm {
        /// The image.
        name: String,
    },
}

/// The store `--image-dir` (or the default) names.
pub fn store(dir: Option<PathBuf>) -> anyhow::Result<Store> {
    let dir = dir
        .or_else(Store::default_dir)
        .context("no image store: set --image-dir or $AIRLOCK_IMAGE_DIR (HOME is unset)")?;
    Ok(Store::open(dir))
}

pub fn image(opts: ImageOpts) -> anyhow::Result<ExitCode> {
    let store = store(opts.image_dir)?;
    match opts.command {
        ImageCommand::Import {
            path,
            name,
            max_bytes,
            max_entries,
            json,
        } => {
            let name = name.unwrap_or_else(|| airlock_image::default_name(&path));
            let bounds = Bounds {
                max_bytes,
                max_entries,
                ..Bounds::default()
            };
            let done = store
                .import(&path, &name, bounds)
                .with_context(|| format!("importing {}", path.display()))?;
            let r = &done.record;
            if json {
                println!("{}", serde_json::to_string(r)?);
            } else {
                let how = if done.reused { "reused" } else { "unpacked" };
                println!(
                    "{}: {} ({}, {} layer(s), root {} {how})",
                    r.name,
                    path.display(),
                    r.format,
                    r.layers,
                    &r.id[..12]
                );
                let d = r.report;
                if d.devices_dropped + d.specials_dropped + d.setid_stripped > 0 {
                    println!(
                        "  dropped {} device node(s) under /dev and {} fifo(s)/socket(s); \
                         stripped set-id bits from {} file(s)",
                        d.devices_dropped, d.specials_dropped, d.setid_stripped
                    );
                }
            }
        }
        ImageCommand::Build(opts) => crate::image_build::build(&store, opts)?,
        ImageCommand::Ls { json } => {
            let all = store.list()?;
            if json {
                println!("{}", serde_json::to_string(&all)?);
            } else {
                println!(
                    "{:<24} {:<12} {:<10} {:>8}  SOURCE",
                    "NAME", "ROOT", "FORMAT", "ENTRIES"
                );
                for r in all {
                    let id = &r.id[..12];
                    let fmt = r.format.to_string();
                    println!(
                        "{:<24} {id:<12} {fmt:<10} {:>8}  {}",
                        r.name, r.entries, r.source
                    );
                }
            }
        }
        ImageCommand::Rm { name } => {
            let freed = store.remove(&name)?;
            let what = if freed {
                "and its root"
            } else {
                "(its root is shared)"
            };
            println!("removed {name} {what}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
