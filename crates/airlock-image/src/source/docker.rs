//! A Docker archive (`docker save`, `podman save --format docker-archive`): `manifest.json`
//! lists one image's config file and layer tars. Layers are checked against the config's diff
//! IDs; the config against its own name when that is a digest.
use serde_json::Value;

use super::layout_files::read_capped;
use super::layout_plan::{Format, LayerRef, Plan, MAX_DOC_BYTES, MAX_LAYERS};
use crate::bounds::Bounds;
use crate::config;
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::unpack::EntryPath;
use airlock_jail::dirfd::DirFd;

fn bad(why: impl Into<String>) -> ImageError {
    ImageError::Json {
        what: "Docker archive manifest.json".into(),
        why: why.into(),
    }
}

/// A path named by manifest.json, normalised (no `..`).
fn member(v: &Value) -> Result<Vec<u8>> {
    let s = v.as_str().ok_or_else(|| bad("a path is not a string"))?;
    EntryPath::parse(s.as_bytes(), &Bounds::default())?
        .map(|p| p.joined())
        .ok_or_else(|| bad("an empty path"))
}

/// The digest a member's name carries (`<hex>.json`, `blobs/sha256/<hex>`), if any.
fn named_digest(path: &[u8]) -> Option<Digest> {
    let s = std::str::from_utf8(path).ok()?;
    let last = s.rsplit('/').next()?;
    Digest::from_hex(last.strip_suffix(".json").unwrap_or(last))
}

/// Reads manifest.json and the config it names.
pub fn plan(dir: &DirFd) -> Result<Plan> {
    let manifest: Value =
        serde_json::from_slice(&read_capped(dir, b"manifest.json", MAX_DOC_BYTES)?)
            .map_err(|e| bad(e.to_string()))?;
    let images = manifest.as_array().ok_or_else(|| bad("not a list"))?;
    let [image] = images.as_slice() else {
        return Err(bad(format!(
            "the archive holds {} images; save exactly one",
            images.len()
        )));
    };
    let cfg_path = member(&image["Config"])?;
    let cfg_bytes = read_capped(dir, &cfg_path, MAX_DOC_BYTES)?;
    if let Some(want) = named_digest(&cfg_path) {
        let got = Digest::of(&cfg_bytes);
        if got != want {
            return Err(ImageError::Digest {
                what: "the image config".into(),
                expected: want.to_string(),
                actual: got.to_string(),
            });
        }
    }
    let cfg = config::parse(&cfg_bytes)?;
    let layers = image["Layers"].as_array().ok_or_else(|| bad("no Layers"))?;
    if layers.len() != cfg.diff_ids.len() || layers.len() > MAX_LAYERS {
        return Err(bad(format!(
            "{} layers but {} diff ids (at most {})",
            layers.len(),
            cfg.diff_ids.len(),
            MAX_LAYERS
        )));
    }
    let layers = layers
        .iter()
        .zip(&cfg.diff_ids)
        .map(|(l, diff)| {
            Ok(LayerRef {
                path: member(l)?,
                blob: None,
                diff_id: diff.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Plan {
        format: Format::Docker,
        config: cfg,
        layers,
    })
}
