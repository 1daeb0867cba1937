//! PAX extended header records (`<len> <key>=<value>\n`), parsed without I/O. Only the keys
//! the importer uses are kept: `path`, `linkpath`, `size`. Sparse-file records are refused
//! (the same as a sparse entry); extended attributes are dropped, so a `security.capability`
//! in an image grants nothing.
use crate::error::{ImageError, Result};

/// What PAX records override for the next entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pax {
    /// The entry's path.
    pub path: Option<Vec<u8>>,
    /// The entry's link target.
    pub linkpath: Option<Vec<u8>>,
    /// The entry's content size.
    pub size: Option<u64>,
}

fn pax_err(m: &str) -> ImageError {
    ImageError::Tar(format!("PAX header: {m}"))
}

/// Parses the body of a PAX header.
pub fn parse(mut data: &[u8]) -> Result<Pax> {
    let mut pax = Pax::default();
    while !data.is_empty() {
        let space = data
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| pax_err("record without a length"))?;
        let len: usize = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| pax_err("bad record length"))?;
        if len <= space + 1 || len > data.len() || data[len - 1] != b'\n' {
            return Err(pax_err("record length does not match its record"));
        }
        let record = &data[space + 1..len - 1];
        let eq = record
            .iter()
            .position(|b| *b == b'=')
            .ok_or_else(|| pax_err("record without '='"))?;
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        match key {
            b"path" => pax.path = Some(value.to_vec()),
            b"linkpath" => pax.linkpath = Some(value.to_vec()),
            b"size" => {
                let size = std::str::from_utf8(value)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| pax_err("bad size"))?;
                pax.size = Some(size);
            }
            k if k.starts_with(b"GNU.sparse.") => {
                return Err(ImageError::Tar("sparse files are not supported".into()))
            }
            _ => {}
        }
        data = &data[len..];
    }
    Ok(pax)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn records_parse_and_lie_detection_holds() {
        let p = parse(b"12 path=a/b\n12 size=100\n27 SCHILY.xattr.user.x=yes\n").unwrap();
        assert_eq!(p.path.as_deref(), Some(&b"a/b"[..]));
        assert_eq!(p.size, Some(100));
        assert!(parse(b"99 path=a\n").is_err());
        assert!(parse(b"5 a=b\n").is_err());
        assert!(parse(b"x path=a\n").is_err());
        assert!(parse(b"22 GNU.sparse.map=0,1\n").is_err());
        assert!(parse(b"11 size=-1\n").is_err());
    }
}
