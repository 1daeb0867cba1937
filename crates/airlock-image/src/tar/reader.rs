//! The blocking tar reader: headers through [`super::header::parse`], long names and PAX
//! records merged into the entry they describe, bodies read through [`TarReader::body`]. Every
//! header block and every body (with its padding) is counted against the budget when the
//! header is read, before a byte of the body is.
use std::io::Read;

use super::header::{self, Kind, BLOCK};
use super::pax;
use crate::bounds::Budget;
use crate::error::{ImageError, Result};

/// Largest PAX header body read (real ones are a few hundred bytes).
const MAX_PAX_BYTES: u64 = 64 * 1024;

/// One archive member, its metadata merged from every header that describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What it is (never a long-name or PAX kind).
    pub kind: Kind,
    /// Its path, as written.
    pub path: Vec<u8>,
    /// The link target, as written (links only).
    pub link: Vec<u8>,
    /// Permission, set-id and sticky bits.
    pub mode: u32,
    /// Content bytes.
    pub size: u64,
    /// Modification time.
    pub mtime: i64,
}

/// Reads entries from a tar stream.
#[derive(Debug)]
pub struct TarReader<R> {
    inner: R,
    /// Body bytes of the current entry not yet read.
    left: u64,
    /// Padding after them.
    pad: u64,
    done: bool,
    max_path: usize,
}

fn padding(size: u64) -> u64 {
    (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64
}

fn io_err(e: std::io::Error) -> ImageError {
    ImageError::Tar(format!("read: {e}"))
}

impl<R: Read> TarReader<R> {
    /// A reader over `inner`; long names and link targets longer than `max_path` are refused.
    pub fn new(inner: R, max_path: usize) -> TarReader<R> {
        TarReader {
            inner,
            left: 0,
            pad: 0,
            done: false,
            max_path,
        }
    }

    /// The stream underneath (to drain it after the end of the archive).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The next entry, or `None` at the end of the archive.
    pub fn next_entry(&mut self, budget: &mut Budget) -> Result<Option<Entry>> {
        self.skip_body()?;
        if self.done {
            return Ok(None);
        }
        let (mut long_name, mut long_link, mut pax) = (None, None, pax::Pax::default());
        loop {
            self.skip_body()?;
            let Some(h) = self.read_header()? else {
                self.done = true;
                return Ok(None);
            };
            budget.take_entry()?;
            budget.take_bytes(BLOCK as u64)?;
            let size = match h.kind {
                Kind::GnuLongName | Kind::GnuLongLink | Kind::Pax | Kind::PaxGlobal => h.size,
                _ => pax.size.unwrap_or(h.size),
            };
            budget.take_bytes(size.saturating_add(padding(size)))?;
            self.left = size;
            self.pad = padding(size);
            let cap = u64::try_from(self.max_path).unwrap_or(u64::MAX) + 1;
            match h.kind {
                Kind::GnuLongName => long_name = Some(trim_nul(self.read_meta(cap)?)),
                Kind::GnuLongLink => long_link = Some(trim_nul(self.read_meta(cap)?)),
                Kind::Pax => pax = pax::parse(&self.read_meta(MAX_PAX_BYTES)?)?,
                Kind::PaxGlobal => drop(self.read_meta(MAX_PAX_BYTES)?),
                kind => {
                    return Ok(Some(Entry {
                        kind,
                        path: pax.path.or(long_name).unwrap_or(h.name),
                        link: pax.linkpath.or(long_link).unwrap_or(h.link),
                        mode: h.mode,
                        size,
                        mtime: h.mtime,
                    }))
                }
            }
        }
    }

    /// The current entry's content (at most its size).
    pub fn body(&mut self) -> Body<'_, R> {
        Body { tar: self }
    }

    fn read_header(&mut self) -> Result<Option<header::Header>> {
        let mut block = [0u8; BLOCK];
        let mut got = 0;
        while got < BLOCK {
            match self.inner.read(&mut block[got..]) {
                Ok(0) if got == 0 => return Ok(None), // a stream without end blocks
                Ok(0) => return Err(ImageError::Tar("truncated header".into())),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        header::parse(&block)
    }

    /// A long name or PAX body, refused when larger than `cap`.
    fn read_meta(&mut self, cap: u64) -> Result<Vec<u8>> {
        if self.left > cap {
            return Err(ImageError::Tar(format!(
                "an extended header of {} bytes exceeds the {cap} byte cap",
                self.left
            )));
        }
        let mut v = Vec::new();
        self.body().read_to_end(&mut v).map_err(io_err)?;
        Ok(v)
    }

    fn skip_body(&mut self) -> Result<()> {
        let n = self.left + self.pad;
        if n > 0 {
            let copied = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink())
                .map_err(io_err)?;
            if copied < n {
                return Err(ImageError::Tar("truncated entry".into()));
            }
        }
        self.left = 0;
        self.pad = 0;
        Ok(())
    }
}

fn trim_nul(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// The content of the current entry.
#[derive(Debug)]
pub struct Body<'a, R> {
    tar: &'a mut TarReader<R>,
}

impl<R: Read> Read for Body<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = usize::try_from(self.tar.left)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        if want == 0 {
            return Ok(0);
        }
        let n = self.tar.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "truncated entry",
            ));
        }
        self.tar.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::bounds::Bounds;
    use crate::tar::header::encode;

    fn member(kind: u8, name: &[u8], link: &[u8], body: &[u8]) -> Vec<u8> {
        let mut v = encode(kind, name, link, 0o644, body.len() as u64).to_vec();
        v.extend_from_slice(body);
        v.resize(v.len().div_ceil(BLOCK) * BLOCK, 0);
        v
    }

    #[test]
    fn long_names_and_pax_apply_to_the_next_entry_only() {
        let long = vec![b'x'; 300];
        let mut tar = member(b'L', b"././@LongLink", b"", &long);
        tar.extend(member(b'0', b"short", b"", b"hello"));
        tar.extend(member(b'x', b"pax", b"", b"16 linkpath=tgt\n"));
        tar.extend(member(b'2', b"link", b"", b""));
        tar.extend(member(b'0', b"plain", b"", b""));
        tar.extend([0u8; 1024]);
        let mut budget = Budget::new(Bounds::default());
        let mut r = TarReader::new(&tar[..], 4096);
        let a = r.next_entry(&mut budget).unwrap().unwrap();
        assert_eq!(a.path, long);
        let mut s = String::new();
        r.body().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");
        let b = r.next_entry(&mut budget).unwrap().unwrap();
        assert_eq!(
            (b.path.as_slice(), b.link.as_slice()),
            (&b"link"[..], &b"tgt"[..])
        );
        let c = r.next_entry(&mut budget).unwrap().unwrap();
        assert_eq!(c.path, b"plain");
        assert!(r.next_entry(&mut budget).unwrap().is_none());
    }

    #[test]
    fn oversized_long_names_and_bodies_are_refused_before_reading() {
        let mut tar = encode(b'L', b"././@LongLink", b"", 0o644, 1 << 30).to_vec();
        tar.extend([b'a'; 512]);
        let mut budget = Budget::new(Bounds::default());
        let e = TarReader::new(&tar[..], 4096)
            .next_entry(&mut budget)
            .unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
        let tar = encode(b'0', b"bomb", b"", 0o644, 1 << 30).to_vec();
        let mut budget = Budget::new(Bounds {
            max_bytes: 1 << 20,
            ..Bounds::default()
        });
        let e = TarReader::new(&tar[..], 4096)
            .next_entry(&mut budget)
            .unwrap_err();
        assert!(e.to_string().contains("bytes"), "{e}");
    }
}
