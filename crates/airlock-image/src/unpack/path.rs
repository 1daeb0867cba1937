//! An entry's path, normalised: relative to the root, plain components only.
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::bounds::Bounds;
use crate::error::{ImageError, Result};

/// A path inside the root: at least one component, none of them empty, `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPath {
    comps: Vec<Vec<u8>>,
}

fn refuse(raw: &[u8], why: &'static str) -> ImageError {
    ImageError::Path {
        path: String::from_utf8_lossy(&raw[..raw.len().min(256)]).into_owned(),
        why,
    }
}

impl EntryPath {
    /// Normalises a path as written in an archive: leading `/` and `./`, empty and `.`
    /// components are dropped; `..` anywhere is refused, as are paths over the bounds. `None`
    /// is the root itself.
    pub fn parse(raw: &[u8], bounds: &Bounds) -> Result<Option<EntryPath>> {
        if raw.len() > bounds.max_path {
            return Err(refuse(
                raw,
                "path is longer than the import bound (--max-path)",
            ));
        }
        let mut comps = Vec::new();
        for c in raw.split(|b| *b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => return Err(refuse(raw, "path climbs with '..'")),
                c if c.len() > bounds.max_name => {
                    return Err(refuse(raw, "a path component is longer than 255 bytes"))
                }
                c => comps.push(c.to_vec()),
            }
        }
        if comps.len() > bounds.max_depth {
            return Err(refuse(raw, "path is nested deeper than the import bound"));
        }
        Ok((!comps.is_empty()).then_some(EntryPath { comps }))
    }

    /// The last component.
    #[must_use]
    pub fn name(&self) -> &OsStr {
        OsStr::from_bytes(self.comps.last().map_or(&[][..], Vec::as_slice))
    }

    /// The components before the last.
    #[must_use]
    pub fn parent(&self) -> &[Vec<u8>] {
        &self.comps[..self.comps.len() - 1]
    }

    /// The first component.
    #[must_use]
    pub fn first(&self) -> &[u8] {
        &self.comps[0]
    }

    /// Components joined with `/`.
    #[must_use]
    pub fn joined(&self) -> Vec<u8> {
        join(&self.comps)
    }

    /// Number of components.
    #[must_use]
    pub fn depth(&self) -> usize {
        self.comps.len()
    }
}

/// Components joined with `/` (`.` for none).
#[must_use]
pub fn join(comps: &[Vec<u8>]) -> Vec<u8> {
    if comps.is_empty() {
        return b".".to_vec();
    }
    comps.join(&b'/')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn paths_normalise_and_climbing_is_refused() {
        let b = Bounds::default();
        let p = EntryPath::parse(b"/./usr//bin/x", &b).unwrap().unwrap();
        assert_eq!(p.joined(), b"usr/bin/x");
        assert_eq!(p.name(), "x");
        assert_eq!(join(p.parent()), b"usr/bin");
        assert_eq!(EntryPath::parse(b"./", &b).unwrap(), None);
        for bad in [&b"../etc/shadow"[..], b"a/../../b", b"/.."] {
            assert!(EntryPath::parse(bad, &b).is_err(), "{bad:?}");
        }
        assert!(EntryPath::parse(&[b'a'; 256], &b).is_err());
        assert!(EntryPath::parse(&b"a/".repeat(129), &b).is_err());
        assert!(EntryPath::parse(&[b'a'; 4097], &b).is_err());
    }
}
