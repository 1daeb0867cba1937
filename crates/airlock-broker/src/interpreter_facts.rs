//! What a run needs to know about an interpreter: the answer of a discovery probe (the host's,
//! `interpreter.rs`, or an image's, `interpreter_image.rs`), and what the disk cache keeps
//! (`interpreter_cache.rs`). Its own file so that the cache and discovery do not name each other.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a run needs to know about an interpreter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interpreter {
    /// The canonical path of the binary to execve.
    pub executable: PathBuf,
    /// `sys.prefix`, `sys.base_prefix` and the exec prefixes.
    pub prefixes: Vec<PathBuf>,
    /// `sys.path` entries (site-packages among them).
    pub path: Vec<PathBuf>,
    /// `sys.version_info[:3]`.
    pub version: Vec<u32>,
    /// The guest bootstrap compiled by this interpreter (`marshal`), hex-encoded.
    pub bootstrap: String,
}
