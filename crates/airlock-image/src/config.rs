//! What an image says about how to run it: environment, working directory, user, entrypoint
//! and command (the `config` object of an OCI or Docker image config), validated and bounded.
//!
//! airlock applies the environment (under the caller's) and the working directory; the user
//! is recorded but never honoured as an identity (a sandbox always runs as its own single
//! unprivileged identity); the entrypoint and command are recorded for `airlock image ls`.
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::Digest;
use crate::error::{ImageError, Result};

/// Most environment entries, entrypoint or command words kept.
const MAX_ITEMS: usize = 1024;
/// Longest environment entry or word.
const MAX_ITEM_BYTES: usize = 32 * 1024;

/// How the image asks to be run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `Env`, as `(name, value)` pairs in order.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// `WorkingDir`: an absolute guest path (`None` when unset or `/`).
    #[serde(default)]
    pub working_dir: Option<String>,
    /// `User`, as written (never applied as an identity).
    #[serde(default)]
    pub user: Option<String>,
    /// `Entrypoint`.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    #[serde(default)]
    pub cmd: Vec<String>,
}

/// An image config: how to run it and the diff IDs of its layers, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedConfig {
    /// How to run it.
    pub config: ImageConfig,
    /// `rootfs.diff_ids`.
    pub diff_ids: Vec<Digest>,
}

fn bad(why: impl Into<String>) -> ImageError {
    ImageError::Json {
        what: "image config".into(),
        why: why.into(),
    }
}

/// Parses an image config document (already read with a cap).
pub fn parse(bytes: &[u8]) -> Result<ParsedConfig> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    let diff_ids = v["rootfs"]["diff_ids"]
        .as_array()
        .ok_or_else(|| bad("no rootfs.diff_ids"))?
        .iter()
        .map(|d| d.as_str().ok_or_else(|| bad("a diff id is not a string")))
        .map(|d| d.and_then(Digest::parse))
        .collect::<Result<Vec<_>>>()?;
    if diff_ids.is_empty() || diff_ids.len() > MAX_ITEMS {
        return Err(bad("rootfs.diff_ids is empty or too long"));
    }
    let c = &v["config"];
    let env = strings(&c["Env"], "Env")?
        .into_iter()
        .map(|e| match e.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(bad(format!("Env entry {e:?} is not NAME=VALUE"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let working_dir = match c["WorkingDir"].as_str().unwrap_or("") {
        "" | "/" => None,
        w if is_plain_absolute(w) => Some(w.trim_end_matches('/').to_owned()),
        w => {
            return Err(bad(format!(
                "WorkingDir {w:?} is not a plain absolute path"
            )))
        }
    };
    let user = c["User"]
        .as_str()
        .filter(|u| !u.is_empty())
        .map(|u| u.chars().take(256).collect());
    Ok(ParsedConfig {
        config: ImageConfig {
            env,
            working_dir,
            user,
            entrypoint: strings(&c["Entrypoint"], "Entrypoint")?,
            cmd: strings(&c["Cmd"], "Cmd")?,
        },
        diff_ids,
    })
}

/// An absolute path of plain components (no `.`, `..`, NUL), at most 4096 bytes.
#[must_use]
pub fn is_plain_absolute(p: &str) -> bool {
    p.starts_with('/')
        && p.len() <= 4096
        && !p.contains('\0')
        && p.split('/')
            .skip(1)
            .all(|c| c != "." && c != ".." && (!c.is_empty() || p.ends_with('/')))
}

fn strings(v: &Value, what: &str) -> Result<Vec<String>> {
    let Some(items) = v.as_array() else {
        return Ok(Vec::new()); // null or absent
    };
    if items.len() > MAX_ITEMS {
        return Err(bad(format!("{what} has more than {MAX_ITEMS} items")));
    }
    items
        .iter()
        .map(|i| match i.as_str() {
            Some(s) if s.len() <= MAX_ITEM_BYTES && !s.contains('\0') => Ok(s.to_owned()),
            _ => Err(bad(format!(
                "{what} holds a non-string, oversized or NUL item"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_config_parses_and_bad_ones_are_refused() {
        let d = Digest::of(b"x");
        let doc = serde_json::json!({
            "config": {"Env": ["PATH=/usr/bin", "A=b=c"], "WorkingDir": "/srv/", "User": "1000:1000",
                       "Cmd": ["python3"]},
            "rootfs": {"type": "layers", "diff_ids": [d.to_string()]}
        });
        let p = parse(doc.to_string().as_bytes()).unwrap();
        assert_eq!(p.diff_ids, vec![d.clone()]);
        assert_eq!(p.config.env[1], ("A".into(), "b=c".into()));
        assert_eq!(p.config.working_dir.as_deref(), Some("/srv"));
        assert_eq!(p.config.user.as_deref(), Some("1000:1000"));
        for bad_doc in [
            serde_json::json!({"rootfs": {"diff_ids": []}}),
            serde_json::json!({"rootfs": {"diff_ids": ["md5:00"]}}),
            serde_json::json!({"config": {"Env": ["=x"]}, "rootfs": {"diff_ids": [d.to_string()]}}),
            serde_json::json!({"config": {"WorkingDir": "/a/../etc"}, "rootfs": {"diff_ids": [d.to_string()]}}),
        ] {
            assert!(parse(bad_doc.to_string().as_bytes()).is_err(), "{bad_doc}");
        }
    }
}
