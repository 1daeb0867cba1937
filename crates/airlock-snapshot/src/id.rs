//! A snapshot's id: the SHA-256 of its stored body, as 64 lowercase hex digits.
use std::fmt;
use std::str::FromStr;

/// A string that is not a snapshot id (64 lowercase hex digits); its first 80 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a snapshot id (64 lowercase hex digits)")]
pub struct BadId(pub String);

/// A validated snapshot id (64 lowercase hex digits). Only a value of this type ever becomes a
/// path in the store, so a caller's string cannot name anything else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SnapshotId(String);

impl SnapshotId {
    /// Parses `s`, refusing anything but exactly 64 lowercase hex digits.
    pub fn parse(s: &str) -> Result<SnapshotId, BadId> {
        let ok = s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if ok {
            Ok(SnapshotId(s.to_owned()))
        } else {
            Err(BadId(s.chars().take(80).collect()))
        }
    }

    /// The id of a body with this digest.
    #[must_use]
    pub fn from_digest(digest: &[u8; 32]) -> SnapshotId {
        SnapshotId(hex::encode(digest))
    }

    /// The 64 hex digits.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for SnapshotId {
    type Err = BadId;

    fn from_str(s: &str) -> Result<SnapshotId, BadId> {
        SnapshotId::parse(s)
    }
}

impl fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_64_lowercase_hex_digits_parse() {
        let good = "0123456789abcdef".repeat(4);
        assert_eq!(SnapshotId::parse(&good).unwrap().as_str(), good);
        for bad in [
            String::new(),
            good.to_uppercase(),
            good[..63].to_owned(),
            format!("{good}0"),
            format!("../{}", &good[3..]),
            format!("{}/", &good[..63]),
            format!(".tmp-{}", &good[5..]),
            format!("{}\0", &good[..63]),
        ] {
            assert!(SnapshotId::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn from_digest_is_hex() {
        let mut d = [0u8; 32];
        d[0] = 0xab;
        d[31] = 0x01;
        let id = SnapshotId::from_digest(&d);
        assert!(id.as_str().starts_with("ab00"));
        assert!(id.as_str().ends_with("01"));
        assert_eq!(SnapshotId::parse(id.as_str()).unwrap(), id);
    }
}
