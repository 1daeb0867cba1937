//! Content digests (`sha256:<hex>`), a reader that hashes what passes through it, and the OCI
//! chain ID that names an unpacked root.
use std::io::Read;

use sha2::{Digest as _, Sha256};

use crate::error::{ImageError, Result};

/// A sha256 digest, as 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// Parses `sha256:<64 hex>`; any other algorithm or shape is refused.
    pub fn parse(s: &str) -> Result<Digest> {
        let hex = s.strip_prefix("sha256:").ok_or_else(|| bad(s))?;
        Digest::from_hex(hex).ok_or_else(|| bad(s))
    }

    /// From 64 hex digits (lowercase or not).
    #[must_use]
    pub fn from_hex(hex: &str) -> Option<Digest> {
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Digest(hex.to_ascii_lowercase()))
    }

    /// The 64 hex digits.
    #[must_use]
    pub fn hex(&self) -> &str {
        &self.0
    }

    /// The digest of `bytes`.
    #[must_use]
    pub fn of(bytes: &[u8]) -> Digest {
        let mut h = Sha256::new();
        h.update(bytes);
        Digest(to_hex(&h.finalize()))
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

fn bad(s: &str) -> ImageError {
    ImageError::Json {
        what: "digest".into(),
        why: format!("{s:?} is not a sha256 digest"),
    }
}

/// The digest a running hash ends with.
pub(crate) fn finish(h: Sha256) -> Digest {
    Digest(to_hex(&h.finalize()))
}

fn to_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// The OCI chain ID of layers with these diff IDs: the first's diff ID, then
/// `sha256(chain + " " + next)`. Two images with the same layers share their root.
#[must_use]
pub fn chain_id(diff_ids: &[Digest]) -> Option<Digest> {
    let (first, rest) = diff_ids.split_first()?;
    Some(rest.iter().fold(first.clone(), |chain, d| {
        Digest::of(format!("{chain} {d}").as_bytes())
    }))
}

/// A reader that hashes and counts everything read through it.
#[derive(Debug)]
pub struct Hashing<R> {
    inner: R,
    hash: Sha256,
    read: u64,
}

impl<R: Read> Hashing<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Hashing<R> {
        Hashing {
            inner,
            hash: Sha256::new(),
            read: 0,
        }
    }

    /// Bytes read so far.
    pub fn count(&self) -> u64 {
        self.read
    }

    /// Reads to the end (at most `cap` more bytes; more is an error) and returns the digest.
    pub fn finish(mut self, cap: u64) -> std::io::Result<Digest> {
        let mut rest = (&mut self).take(cap.saturating_add(1));
        let n = std::io::copy(&mut rest, &mut std::io::sink())?;
        if n > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                "more data than declared",
            ));
        }
        Ok(Digest(to_hex(&self.hash.finalize())))
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn digests_parse_strictly_and_hash_correctly() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(Digest::of(b"").hex(), empty);
        assert_eq!(
            Digest::parse(&format!("sha256:{empty}")).unwrap().hex(),
            empty
        );
        for bad in ["sha512:00", "sha256:xyz", empty, "sha256:../../etc"] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
        let mut h = Hashing::new(&b"abc"[..]);
        let mut buf = [0u8; 1];
        h.read_exact(&mut buf).unwrap();
        assert_eq!(h.finish(2).unwrap(), Digest::of(b"abc"));
        assert!(Hashing::new(&b"abc"[..]).finish(2).is_err());
    }

    #[test]
    fn the_chain_id_of_one_layer_is_its_diff_id() {
        let a = Digest::of(b"a");
        let b = Digest::of(b"b");
        assert_eq!(chain_id(std::slice::from_ref(&a)), Some(a.clone()));
        let ab = chain_id(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(ab, Digest::of(format!("{a} {b}").as_bytes()));
        assert_eq!(chain_id(&[]), None);
    }
}
