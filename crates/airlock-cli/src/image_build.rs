//! `airlock image build --preset NAME`: a ready image in one command. The archive is made by
//! `airlock_image::build` (mmdebstrap, podman or buildah, whichever is on PATH) and imported
//! into the store under the preset's name, so `airlock run --image python-data` works next.
use std::path::PathBuf;

use airlock_image::build::{self, Builder, Cache, Recipe};
use airlock_image::{Bounds, Store};
use anyhow::Context;

/// Options of `airlock image build`.
#[derive(Debug, clap::Args)]
pub struct BuildOpts {
    /// The preset: python-data (python3, pip, venv, numpy, pandas, matplotlib, scipy,
    /// scikit-learn).
    #[arg(long, value_name = "NAME")]
    pub preset: String,
    /// The image's name [default: the preset's].
    #[arg(long)]
    pub name: Option<String>,
    /// mmdebstrap, podman or buildah [default: the first of them on PATH].
    #[arg(long, value_name = "TOOL")]
    pub builder: Option<String>,
    /// The Debian suite [default: the host's when it is Debian or Ubuntu, else bookworm].
    #[arg(long)]
    pub suite: Option<String>,
    /// Keep the built archive in DIR and reuse it while the recipe is the same (one build per
    /// machine; every user who can read DIR imports the same archive).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Print the record as JSON (with the builder, the recipe key and the build's seconds).
    #[arg(long)]
    pub json: bool,
}

pub fn build(store: &Store, opts: BuildOpts) -> anyhow::Result<()> {
    let preset = build::preset(&opts.preset)?;
    let name = opts.name.unwrap_or_else(|| preset.name.to_owned());
    if !airlock_image::valid_name(&name) {
        // Refused before a long build, not after it.
        anyhow::bail!(airlock_image::ImageError::BadName(name));
    }
    if let Some(s) = opts.suite.as_deref().filter(|s| !valid_suite(s)) {
        anyhow::bail!("--suite {s:?}: a Debian or Ubuntu suite name (bookworm, trixie, noble) is 1 to 32 of [a-z0-9-]");
    }
    let wanted = opts.builder.as_deref().map(Builder::parse).transpose()?;
    let (builder, program) = build::choose(wanted, std::env::var_os("PATH").as_deref())?;
    let recipe = Recipe::new(preset, builder, opts.suite.as_deref());
    let key = recipe.key();
    let cache = opts.cache.as_deref().map(Cache::open).transpose()?;
    let cached = cache.as_ref().and_then(|c| c.get(preset.name, &key));
    if !opts.json && cached.is_none() {
        eprintln!(
            "building {} with {builder} ({}, recipe {key}); a first build takes a few minutes",
            preset.name, recipe.suite
        );
    }
    let built = build::make(&recipe, &program, cache.as_ref())
        .with_context(|| format!("building the {} preset", preset.name))?;
    let source = format!(
        "preset {} ({builder}, {}, recipe {key})",
        preset.name, recipe.suite
    );
    let done = store
        .import_labelled(&built.path, &name, Bounds::default(), &source)
        .with_context(|| format!("importing {}", built.path.display()))?;
    let r = &done.record;
    if opts.json {
        let v = serde_json::json!({
            "record": r, "builder": builder.program(), "recipe": key, "suite": recipe.suite,
            "cached": built.cached, "build_seconds": built.seconds,
        });
        println!("{v}");
        return Ok(());
    }
    let how = if built.cached {
        "from the cache".to_owned()
    } else {
        format!("built in {:.0} s", built.seconds)
    };
    println!(
        "{name}: {} ({how}), root {} ({} entries)",
        source,
        &r.id[..12],
        r.entries
    );
    println!(
        "run on it: airlock run --image {name} script.py   (SDK: client.sandbox(image=\"{name}\"))"
    );
    Ok(())
}

/// A suite name goes into the builder's arguments and a Containerfile's `FROM` line.
fn valid_suite(s: &str) -> bool {
    (1..=32).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}
