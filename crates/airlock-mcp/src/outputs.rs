//! Declared outputs: files a run's caller names up front (`outputs: ["result.csv"]`), read
//! from the run's work dir after the run and returned in the MCP result.
//!
//! Reading happens only after [`airlock_broker::run`] returned, when every process of the
//! run is gone, through the sandbox's work dir handle (never a host path). Each path is a
//! [`GuestRelPath`] (relative, no `..`), opened with `openat2` following no link at all, the
//! file must be a regular file with one link, and the sizes are bounded by the policy's
//! `limits.files_out` (per file, total, count) against the bytes actually read.
use std::io::Read;
use std::os::fd::AsFd;

use airlock_jail::dirfd::{fstat, DirFd, FileKind};
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

/// Read the declared outputs from the run's work dir handle, within `limits`.
pub fn collect(work: &DirFd, declared: &[GuestRelPath], limits: &TransferLimits) -> Vec<Output> {
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
        match read_one(work, p, limits, total) {
            Ok(buf) => {
                let n = u64::try_from(buf.len()).unwrap_or(u64::MAX);
                total = total.saturating_add(n);
                out.push(Output {
                    path: shown.to_owned(),
                    text: Some(String::from_utf8_lossy(&buf).into_owned()),
                    bytes: Some(n),
                    error: None,
                });
            }
            Err(why) => out.push(refused(shown, why)),
        }
    }
    out
}

/// One output's bytes: opened beneath the work dir following no link, a regular file with one
/// link, within the per-file and total caps (re-checked against the bytes read).
fn read_one(
    work: &DirFd,
    p: &GuestRelPath,
    limits: &TransferLimits,
    total: u64,
) -> Result<Vec<u8>, String> {
    let file = work
        .open_read(p.as_str())
        .map_err(|e| match e.raw_os_error() {
            _ if e.kind() == std::io::ErrorKind::NotFound => {
                "the program did not create it".to_owned()
            }
            // ELOOP / EXDEV: openat2 met a link.
            Some(40 | 18) => "the path goes through a symlink".to_owned(),
            _ => e.to_string(),
        })?;
    let meta = fstat(file.as_fd()).map_err(|e| e.to_string())?;
    if meta.kind != FileKind::Regular || meta.nlink != 1 {
        return Err("not a regular file with a single link".into());
    }
    let cap = limits.max_bytes_per_file;
    if meta.size > cap {
        return Err(format!(
            "{} bytes, above the {cap} byte per-file cap",
            meta.size
        ));
    }
    let mut buf = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    let n = u64::try_from(buf.len()).unwrap_or(u64::MAX);
    if n > cap {
        return Err(format!("above the {cap} byte per-file cap"));
    }
    if total.saturating_add(n) > limits.max_total_bytes {
        return Err(format!(
            "outputs exceed the {} byte total cap",
            limits.max_total_bytes
        ));
    }
    Ok(buf)
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
        let work = DirFd::open(dir.path()).unwrap();
        let got = collect(&work, &declared, &TransferLimits::DEFAULT);
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
        let work = DirFd::open(dir.path()).unwrap();
        let got = collect(&work, &[check("big").unwrap()], &limits);
        assert!(got[0].error.as_deref().unwrap().contains("cap"));
    }
}
