//! Lexical validation of a path relative to the guest's working directory.
//!
//! This is the lexical half only: it guarantees the name cannot traverse, and says nothing
//! about what already sits at the path. A backend still resolves beneath the working directory
//! with no-follow primitives (e.g. `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`).

use std::fmt;

use thiserror::Error;

/// Longest accepted relative guest path, in bytes.
pub const MAX_GUEST_PATH_BYTES: usize = 1024;

/// Why a relative guest path was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum GuestPathError {
    /// Empty: it would name the working directory itself.
    #[error("guest path is empty (it would name the working directory itself)")]
    Empty,
    /// Absolute.
    #[error("guest path {0:?} is absolute")]
    Absolute(String),
    /// Contains a backslash.
    #[error("guest path {0:?} contains a backslash")]
    Backslash(String),
    /// Contains `.`, `..` or an empty segment.
    #[error("guest path {0:?} contains a '.', '..' or empty segment")]
    BadSegment(String),
    /// Contains a NUL or other control character.
    #[error("guest path contains a control character")]
    ControlCharacter,
    /// Longer than [`MAX_GUEST_PATH_BYTES`].
    #[error("guest path is {0} bytes, above the {MAX_GUEST_PATH_BYTES}-byte cap")]
    TooLong(usize),
}

/// A path relative to a guest working directory that cannot traverse out of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GuestRelPath(String);

impl GuestRelPath {
    /// Validates `raw`.
    pub fn parse(raw: &str) -> Result<GuestRelPath, GuestPathError> {
        if raw.is_empty() {
            return Err(GuestPathError::Empty);
        }
        if raw.len() > MAX_GUEST_PATH_BYTES {
            return Err(GuestPathError::TooLong(raw.len()));
        }
        if raw.chars().any(char::is_control) {
            return Err(GuestPathError::ControlCharacter);
        }
        if raw.starts_with('/') {
            return Err(GuestPathError::Absolute(raw.to_owned()));
        }
        if raw.contains('\\') {
            return Err(GuestPathError::Backslash(raw.to_owned()));
        }
        if raw
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        {
            return Err(GuestPathError::BadSegment(raw.to_owned()));
        }
        Ok(GuestRelPath(raw.to_owned()))
    }

    /// `raw` as a path in the guest's `/work`: relative to it, or absolute under it
    /// (`/work/a.txt` and `a.txt` name the same file). Anything else, `/work` itself and any
    /// path that would leave it included, is refused as [`GuestRelPath::parse`] refuses it.
    pub fn parse_in_work(raw: &str) -> Result<GuestRelPath, GuestPathError> {
        GuestRelPath::parse(raw.strip_prefix("/work/").unwrap_or(raw))
    }

    /// The path as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its segments.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// This path joined under `base` (an absolute guest directory).
    #[must_use]
    pub fn under(&self, base: &str) -> String {
        format!("{}/{}", base.trim_end_matches('/'), self.0)
    }

    /// `self` followed by `child`.
    #[must_use]
    pub fn join(&self, child: &GuestRelPath) -> GuestRelPath {
        GuestRelPath(format!("{}/{}", self.0, child.0))
    }

    /// Whether `other` is this path or lies beneath it.
    #[must_use]
    pub fn contains(&self, other: &GuestRelPath) -> bool {
        other.0 == self.0
            || other
                .0
                .strip_prefix(&self.0)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

impl fmt::Display for GuestRelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for GuestRelPath {
    type Err = GuestPathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GuestRelPath::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_is_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "..",
            "a/../b",
            "a//b",
            "./a",
            "a\\b",
            "a\0b",
            "a/",
        ] {
            assert!(GuestRelPath::parse(bad).is_err(), "{bad:?}");
        }
        let p = GuestRelPath::parse("out/diagram.png").unwrap();
        assert_eq!(p.under("/work/"), "/work/out/diagram.png");
    }

    #[test]
    fn a_work_prefix_names_the_same_path_and_nothing_outside() {
        let p = |s: &str| GuestRelPath::parse_in_work(s);
        assert_eq!(p("/work/a/b.txt").unwrap(), p("a/b.txt").unwrap());
        assert_eq!(p("/work/a/b.txt").unwrap().as_str(), "a/b.txt");
        for bad in [
            "/work",
            "/work/",
            "/work//x",
            "/work/../etc/passwd",
            "/etc/passwd",
            "/workx/a",
            "/tmp/a",
            "../a",
            "/work/./a",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn contains_is_segment_aware() {
        let a = GuestRelPath::parse("calls/c1").unwrap();
        assert!(a.contains(&GuestRelPath::parse("calls/c1/x").unwrap()));
        assert!(a.contains(&a));
        assert!(!a.contains(&GuestRelPath::parse("calls/c10").unwrap()));
    }
}
