//! An OCI image layout: `oci-layout`, `index.json`, `blobs/sha256/…`. The index may name one
//! manifest, one per platform (the one for this machine is taken), or a nested index.
use serde_json::Value;

use super::layout_files::{blob_path, read_blob, read_capped};
use super::layout_plan::{Format, LayerRef, Plan, MAX_DOC_BYTES, MAX_LAYERS};
use crate::config;
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use airlock_jail::dirfd::DirFd;

const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

fn bad(why: impl Into<String>) -> ImageError {
    ImageError::Json {
        what: "OCI layout".into(),
        why: why.into(),
    }
}

/// The architecture name OCI uses for this machine.
#[must_use]
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Reads the layout's index, manifest and config (each checked against its digest).
pub fn plan(dir: &DirFd) -> Result<Plan> {
    let index: Value = serde_json::from_slice(&read_capped(dir, b"index.json", MAX_DOC_BYTES)?)
        .map_err(|e| bad(format!("index.json: {e}")))?;
    let mut desc = pick(&index)?;
    for _ in 0..2 {
        let media = desc["mediaType"].as_str().unwrap_or("");
        if media != INDEX && media != DOCKER_LIST {
            break;
        }
        let nested: Value =
            serde_json::from_slice(&read_blob(dir, &digest(&desc)?, MAX_DOC_BYTES)?)
                .map_err(|e| bad(format!("nested index: {e}")))?;
        desc = pick(&nested)?;
    }
    let manifest: Value = serde_json::from_slice(&read_blob(dir, &digest(&desc)?, MAX_DOC_BYTES)?)
        .map_err(|e| bad(format!("manifest: {e}")))?;
    let cfg = config::parse(&read_blob(
        dir,
        &digest(&manifest["config"])?,
        MAX_DOC_BYTES,
    )?)?;
    let layers = manifest["layers"]
        .as_array()
        .ok_or_else(|| bad("manifest has no layers"))?;
    if layers.len() != cfg.diff_ids.len() || layers.len() > MAX_LAYERS {
        return Err(bad(format!(
            "{} layers but {} diff ids (at most {MAX_LAYERS})",
            layers.len(),
            cfg.diff_ids.len()
        )));
    }
    let layers = layers
        .iter()
        .zip(&cfg.diff_ids)
        .map(|(l, diff)| {
            let d = digest(l)?;
            Ok(LayerRef {
                path: blob_path(&d),
                blob: Some(d),
                diff_id: diff.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Plan {
        format: Format::Oci,
        config: cfg,
        layers,
    })
}

fn digest(desc: &Value) -> Result<Digest> {
    Digest::parse(
        desc["digest"]
            .as_str()
            .ok_or_else(|| bad("a descriptor has no digest"))?,
    )
}

/// The one manifest of an index for this machine.
fn pick(index: &Value) -> Result<Value> {
    let all = index["manifests"]
        .as_array()
        .ok_or_else(|| bad("index has no manifests"))?;
    let fits = |m: &&Value| {
        let p = &m["platform"];
        p.is_null()
            || (p["os"].as_str().is_none_or(|o| o == "linux")
                && p["architecture"].as_str().is_none_or(|a| a == host_arch()))
    };
    let mut ours = all.iter().filter(fits);
    match (ours.next(), ours.next(), all.len()) {
        (Some(m), None, _) => Ok(m.clone()),
        (Some(_), Some(_), _) => Err(bad(
            "the index names several images for this platform; save just one",
        )),
        (None, _, 0) => Err(bad("index names no manifest")),
        (None, _, _) => Err(bad(format!(
            "no image in the index is for linux/{}",
            host_arch()
        ))),
    }
}
