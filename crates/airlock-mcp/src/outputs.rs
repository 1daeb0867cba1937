//! Declared outputs: files a call names up front (`outputs: ["plot.png"]`), read from the
//! sandbox's /work after the run and returned in the MCP result, each once.
//!
//! Reading happens only after the run returned, when every process of the run is gone,
//! through the sandbox's work dir handle (never a host path): each path is a [`GuestRelPath`]
//! (relative, no `..`), opened following no link at all, the file must be regular with one
//! link, and the sizes are bounded by the policy's `limits.files_out` (per file, total, count)
//! against the bytes actually read.
use airlock_broker::GUEST_WORK_DIR;
use airlock_local::LocalSandbox;
use airlock_policy::{GuestRelPath, TransferLimits};
use airlock_router::{Sandbox, SandboxError};
use serde::Serialize;

use crate::media::{self, Form};

/// One declared output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Output {
    /// The path as declared (relative to /work).
    pub path: String,
    /// Its media type, when it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<&'static str>,
    /// How it is attached to the result: `image`, `text` or `blob`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'static str>,
    /// Its size in bytes, when it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Why it was not returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The bytes (attached once, as a content block; never in the structured content).
    #[serde(skip)]
    pub data: Option<(Vec<u8>, Form)>,
}

fn refused(path: &str, why: impl Into<String>) -> Output {
    Output {
        path: path.to_owned(),
        mime_type: None,
        content: None,
        bytes: None,
        error: Some(why.into()),
        data: None,
    }
}

/// A file error in words for the model, naming only the guest path.
pub fn why(e: &SandboxError) -> String {
    match e {
        SandboxError::NotFound { .. } => "no such file".to_owned(),
        SandboxError::NotConfined { .. } => {
            "the path goes through a symlink or a non-directory".to_owned()
        }
        SandboxError::TooLarge { size, max, .. } => {
            format!("{size} bytes, above the {max} byte cap")
        }
        other => other.to_string(),
    }
}

/// Read the declared outputs from `sandbox`'s /work, within `limits`.
pub async fn collect(
    sandbox: &LocalSandbox,
    declared: &[GuestRelPath],
    limits: &TransferLimits,
) -> Vec<Output> {
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
        let room = limits.max_total_bytes.saturating_sub(total);
        let cap = limits.max_bytes_per_file.min(room);
        match sandbox.read_file(GUEST_WORK_DIR, p, cap).await {
            Ok(data) => {
                let n = u64::try_from(data.len()).unwrap_or(u64::MAX);
                total = total.saturating_add(n);
                let (mime, form) = media::classify(shown, &data);
                out.push(Output {
                    path: shown.to_owned(),
                    mime_type: Some(mime),
                    content: Some(form.as_str()),
                    bytes: Some(n),
                    error: None,
                    data: Some((data, form)),
                });
            }
            Err(SandboxError::NotFound { .. }) => {
                out.push(refused(shown, "the program did not create it"));
            }
            Err(SandboxError::TooLarge { size, .. }) if cap < limits.max_bytes_per_file => {
                out.push(refused(
                    shown,
                    format!(
                        "{size} bytes: the outputs exceed the {} byte total cap",
                        limits.max_total_bytes
                    ),
                ));
            }
            Err(e) => out.push(refused(shown, why(&e))),
        }
    }
    out
}

/// The URI a guest file is attached under.
pub fn uri(path: &str) -> String {
    format!("airlock://work/{path}")
}
