//! Artifact names: the spelling an output lands under, validated lexically after NFC, and the
//! key two names collide under.
//!
//! Validation is lexical: it guarantees a name cannot traverse (no empty name or segment, no
//! absolute path, backslash, `.` or `..`, control character, nothing over
//! [`MAX_ARTIFACT_NAME_BYTES`]), and is checked on the NFC form, which is also the spelling
//! that lands. It says nothing about what already sits at the destination: a sink confines
//! its own destination (see `airlock_local::sink`).
//!
//! Two names collide when they are one file at a case-insensitive or normalising
//! destination: their [`ArtifactName::collision_key`]s (NFC, then full case folding by
//! upper-then-lower casing, then NFC again) are equal. So `Report.txt` / `report.TXT`,
//! `café` in NFC / NFD, and `STRASSE` / `straße` all collide.

use std::fmt;

use thiserror::Error;
use unicode_normalization::UnicodeNormalization;

/// Longest accepted artifact name, in bytes of its NFC form (the common `NAME_MAX`).
pub const MAX_ARTIFACT_NAME_BYTES: usize = 255;

/// Why an artifact name was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NameError {
    /// Empty.
    #[error("artifact name is empty")]
    Empty,
    /// Starts with `/`.
    #[error("artifact name {0:?} is absolute")]
    Absolute(String),
    /// Contains `\`.
    #[error("artifact name {0:?} contains a backslash")]
    Backslash(String),
    /// Contains an empty, `.` or `..` segment.
    #[error("artifact name {0:?} contains an empty, '.' or '..' segment")]
    BadSegment(String),
    /// Contains a control character.
    #[error("artifact name contains a control character")]
    ControlCharacter,
    /// Longer than [`MAX_ARTIFACT_NAME_BYTES`] after NFC.
    #[error("artifact name is {0} bytes after NFC, above the {MAX_ARTIFACT_NAME_BYTES}-byte cap")]
    TooLong(usize),
}

/// A validated artifact name, held in NFC.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArtifactName(String);

impl ArtifactName {
    /// The name in NFC, the spelling that lands.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its `/`-separated segments.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The key two names collide under (NFC, case-folded, NFC).
    #[must_use]
    pub fn collision_key(&self) -> String {
        collision_key(&self.0)
    }
}

impl fmt::Display for ArtifactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The collision key of any string: NFC, upper-then-lower case folding, NFC.
#[must_use]
pub fn collision_key(s: &str) -> String {
    let nfc: String = s.nfc().collect();
    nfc.to_uppercase().to_lowercase().nfc().collect()
}

/// Validates `raw` (on its NFC form) and returns that form.
pub fn validate_artifact_name(raw: &str) -> Result<ArtifactName, NameError> {
    let name: String = raw.nfc().collect();
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::ControlCharacter);
    }
    if name.len() > MAX_ARTIFACT_NAME_BYTES {
        return Err(NameError::TooLong(name.len()));
    }
    if name.starts_with('/') {
        return Err(NameError::Absolute(name));
    }
    if name.contains('\\') {
        return Err(NameError::Backslash(name));
    }
    if name
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return Err(NameError::BadSegment(name));
    }
    Ok(ArtifactName(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_and_junk_are_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "..",
            "a/../b",
            "a//b",
            "./a",
            "a/",
            "a\\b",
            "a\u{0}b",
            "a\nb",
            "a\u{7f}b",
            "a\u{85}b",
        ] {
            assert!(validate_artifact_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            validate_artifact_name(&"x".repeat(256)),
            Err(NameError::TooLong(256))
        );
        assert!(validate_artifact_name(&"x".repeat(255)).is_ok());
        assert_eq!(
            validate_artifact_name("out/d.png").unwrap().as_str(),
            "out/d.png"
        );
    }

    #[test]
    fn the_length_cap_is_measured_after_nfc() {
        // 'e' + combining acute (3 bytes NFD) composes to 'é' (2 bytes NFC).
        let nfd = "e\u{301}".repeat(100); // 300 bytes
        let n = validate_artifact_name(&nfd).unwrap();
        assert_eq!(n.as_str().len(), 200);
        assert_eq!(n.as_str(), "\u{e9}".repeat(100));
    }

    #[test]
    fn collisions_by_case_and_form() {
        let key = |s: &str| validate_artifact_name(s).unwrap().collision_key();
        assert_eq!(key("Report.TXT"), key("report.txt"));
        assert_eq!(key("caf\u{e9}"), key("cafe\u{301}"));
        assert_eq!(key("CAF\u{c9}"), key("cafe\u{301}"));
        assert_eq!(key("STRASSE"), key("stra\u{df}e"));
        assert_ne!(key("a.txt"), key("b.txt"));
    }
}
