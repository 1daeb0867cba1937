//! Declared outputs: files a run's caller names up front (`outputs: ["result.csv"]`), read
//! from the run's work dir after the run and returned in the MCP result.
//!
//! Reading happens only after [`airlock_broker::run`] returned, when every process of the
//! run is gone, so nothing can swap a path between the checks and the read. Still: each path
//! is a [`GuestRelPath`] (relative, no `..`), every component is checked with `lstat` and
//! refused if it is a symlink, the file must be a regular file with one link, and the sizes
//! are bounded by the policy's `limits.files_out` (per file, total, count).
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use airlock_policy::{GuestRelPath, TransferLimits};
use serde::Serialize;

/// One declared output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Output {
    /// The path as declared.
    pub path: String,
    /// Its text (UTF-8, lossily decoded) when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its size in bytes when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Why it was not returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn refused(path: &str, why: impl Into<String>) -> Output {
    Output {
        path: path.to_owned(),
        text: None,
        bytes: None,
        error: Some(why.into()),
    }
}

/// Check a declared path before the run (so a bad one refuses the call, not the result).
pub fn check(path: &str) -> Result<GuestRelPath, String> {
    GuestRelPath::parse(path).map_err(|e| format!("output path {path:?}: {e}"))
}

/// Read the declared outputs from `work_dir`, within `limits`.
pub fn collect(work_dir: &Path, declared: &[GuestRelPath], limits: &TransferLimits) -> Vec<Output> {
    let mut total: u64 = 0;
    let mut out = Vec::new();
    for (i, p) in declared.iter().enumerate() {
        let shown = p.as_str();
        if u64::try_from(i).unwrap_or(u64::MAX) >= limits.max_files {
            out.push(refused(
                shown,
                format!("more than {} outputs declared", limits.max_files),
            ));
            continue;
        }
        let mut at = work_dir.to_path_buf();
        let mut bad = None;
        for seg in p.segments() {
            at.push(seg);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    bad = Some("the path goes through a symlink".to_owned());
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    bad = Some("the program did not create it".to_owned());
                    break;
                }
                Err(e) => {
                    bad = Some(e.to_string());
                    break;
                }
            }
        }
        if let Some(why) = bad {
            out.push(refused(shown, why));
            continue;
        }
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) => {
                out.push(refused(shown, e.to_string()));
                continue;
            }
        };
        if !meta.file_type().is_file() || meta.nlink() != 1 {
            out.push(refused(shown, "not a regular file with a single link"));
            continue;
        }
        if meta.len() > limits.max_bytes_per_file {
            out.push(refused(
                shown,
                format!(
                    "{} bytes, above the {} byte per-file cap",
                    meta.len(),
                    limits.max_bytes_per_file
                ),
            ));
            continue;
        }
        if total.saturating_add(meta.len()) > limits.max_total_bytes {
            out.push(refused(
                shown,
                format!(
                    "outputs exceed the {} byte total cap",
                    limits.max_total_bytes
                ),
            ));
            continue;
        }
        let mut buf = Vec::new();
        let read = std::fs::File::open(&at).and_then(|f| {
            f.take(limits.max_bytes_per_file.saturating_add(1))
                .read_to_end(&mut buf)
        });
        match read {
            Ok(_) => {
                let n = u64::try_from(buf.len()).unwrap_or(u64::MAX);
                total = total.saturating_add(n);
                out.push(Output {
                    path: shown.to_owned(),
                    text: Some(String::from_utf8_lossy(&buf).into_owned()),
                    bytes: Some(n),
                    error: None,
                });
            }
            Err(e) => out.push(refused(shown, e.to_string())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_declared_files_and_refuses_symlinks_and_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/a.txt"), "hello").unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("l")).unwrap();
        let declared: Vec<GuestRelPath> = ["d/a.txt", "l/hostname", "nope"]
            .iter()
            .map(|p| check(p).unwrap())
            .collect();
        let got = collect(dir.path(), &declared, &TransferLimits::DEFAULT);
        assert_eq!(got[0].text.as_deref(), Some("hello"));
        assert!(got[1].error.as_deref().unwrap().contains("symlink"));
        assert!(got[2].error.is_some());
        assert!(check("../x").is_err());
        assert!(check("/etc/passwd").is_err());
    }

    #[test]
    fn size_caps_hold() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big"), vec![b'a'; 100]).unwrap();
        let limits = TransferLimits {
            max_bytes_per_file: 10,
            ..TransferLimits::DEFAULT
        };
        let got = collect(dir.path(), &[check("big").unwrap()], &limits);
        assert!(got[0].error.as_deref().unwrap().contains("cap"));
    }
}
