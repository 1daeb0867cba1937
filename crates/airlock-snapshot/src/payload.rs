//! The payload the body's blocks carry: records, length-prefixed, little-endian.
//!
//! ```text
//! payload  := manifest kernel tree after
//! manifest := len:u32 bytes                      (at most MAX_MANIFEST)
//! kernel   := 0:u8 | 1:u8 chunks | 2:u8          (absent | here | after the tree)
//! after    := chunks                             (only after kernel 2)
//! chunks   := (len:u32 bytes)* 0:u32             (1 <= len <= CHUNK_LEN)
//! tree     := entry* 'E' entries:u64 bytes:u64
//! entry    := 'D' name meta      a directory: the entries up to its 'U' are inside it
//!           | 'U'                the end of the innermost open directory
//!           | 'F' name meta chunks              a regular file and its content
//!           | 'L' name target                   a symbolic link
//! name     := len:u8 bytes       (1-255 bytes; no '/', no NUL; not "." or "..")
//! meta     := mode:u32 mtime:i64 mtime_nsec:u32
//! target   := len:u16 bytes      (1-4096 bytes, no NUL)
//! ```
//!
//! A file's content is chunked and ends with a zero length, so a file that shrank or grew
//! while it was read still yields a payload whose framing is exact: nothing is declared
//! before it is read. At top level only 'D' (and 'E') may appear.
use std::io::{self, Read, Write};

use crate::bounds::MAX_MANIFEST;
use crate::decode::from_io;
use crate::error::{Result, SnapshotError};

/// Most bytes in one content chunk.
pub(crate) const CHUNK_LEN: usize = 256 << 10;
/// Longest symlink target (`PATH_MAX`).
pub(crate) const MAX_TARGET: usize = 4096;

/// Record tags.
pub(crate) mod tag {
    /// A directory opens.
    pub(crate) const DIR: u8 = b'D';
    /// The innermost open directory closes.
    pub(crate) const UP: u8 = b'U';
    /// A regular file.
    pub(crate) const FILE: u8 = b'F';
    /// A symbolic link.
    pub(crate) const LINK: u8 = b'L';
    /// The end of the tree.
    pub(crate) const END: u8 = b'E';
}

/// The metadata kept of a directory or file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryMeta {
    /// `st_mode & 07777` as captured (masked again on restore).
    pub(crate) mode: u32,
    /// Modification time, seconds.
    pub(crate) mtime: i64,
    /// Its nanoseconds.
    pub(crate) mtime_nsec: u32,
}

/// Whether `name` is one path segment a restore may create.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != b"."
        && name != b".."
        && !name.contains(&b'/')
        && !name.contains(&0)
}

fn valid_target(t: &[u8]) -> bool {
    !t.is_empty() && t.len() <= MAX_TARGET && !t.contains(&0)
}

fn len_u32(n: usize) -> io::Result<[u8; 4]> {
    u32::try_from(n)
        .map(u32::to_le_bytes)
        .map_err(|_| io::Error::other("length over 4 GiB"))
}

/// Writes the manifest.
pub(crate) fn put_manifest(w: &mut impl Write, manifest: &[u8]) -> io::Result<()> {
    w.write_all(&len_u32(manifest.len())?)?;
    w.write_all(manifest)
}

/// Where a payload's kernel state is. Snapshots are written with it after the tree (a restore
/// of the files then never decodes it); those written before December 2026 have it before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelAt {
    /// None.
    Absent,
    /// Right here, before the tree.
    Here,
    /// After the tree.
    AfterTree,
}

/// Writes where the kernel state is.
pub(crate) fn put_kernel_marker(w: &mut impl Write, at: KernelAt) -> io::Result<()> {
    let b = match at {
        KernelAt::Absent => 0,
        KernelAt::Here => 1,
        KernelAt::AfterTree => 2,
    };
    w.write_all(&[b])
}

/// Writes one content chunk (`bytes` non-empty, at most [`CHUNK_LEN`]).
pub(crate) fn put_chunk(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    w.write_all(&len_u32(bytes.len())?)?;
    w.write_all(bytes)
}

/// Ends a run of chunks.
pub(crate) fn put_chunks_end(w: &mut impl Write) -> io::Result<()> {
    w.write_all(&0u32.to_le_bytes())
}

/// Writes a 'D' or 'F' record's head.
pub(crate) fn put_entry(w: &mut impl Write, tag: u8, name: &[u8], m: EntryMeta) -> io::Result<()> {
    put_tag_name(w, tag, name)?;
    w.write_all(&m.mode.to_le_bytes())?;
    w.write_all(&m.mtime.to_le_bytes())?;
    w.write_all(&m.mtime_nsec.to_le_bytes())
}

/// Writes an 'L' record.
pub(crate) fn put_link(w: &mut impl Write, name: &[u8], target: &[u8]) -> io::Result<()> {
    if !valid_target(target) {
        return Err(io::Error::other("symlink target not storable"));
    }
    put_tag_name(w, tag::LINK, name)?;
    let len = u16::try_from(target.len()).map_err(|_| io::Error::other("target too long"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(target)
}

fn put_tag_name(w: &mut impl Write, tag: u8, name: &[u8]) -> io::Result<()> {
    let len = u8::try_from(name.len()).ok().filter(|_| valid_name(name));
    let len = len.ok_or_else(|| io::Error::other("name not storable"))?;
    w.write_all(&[tag, len])?;
    w.write_all(name)
}

/// Writes the 'E' record.
pub(crate) fn put_end(w: &mut impl Write, entries: u64, bytes: u64) -> io::Result<()> {
    w.write_all(&[tag::END])?;
    w.write_all(&entries.to_le_bytes())?;
    w.write_all(&bytes.to_le_bytes())
}

/// A payload being parsed; every length is checked before anything is sized by it.
#[derive(Debug)]
pub(crate) struct Input<R> {
    r: R,
}

impl<R: Read> Input<R> {
    pub(crate) fn new(r: R) -> Input<R> {
        Input { r }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.r
            .read_exact(&mut b)
            .map_err(|e| from_io(e, "read the snapshot"))?;
        Ok(b)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Exactly `n` bytes (the caller has bounded `n`).
    pub(crate) fn bytes(&mut self, n: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; n];
        self.r
            .read_exact(&mut v)
            .map_err(|e| from_io(e, "read the snapshot"))?;
        Ok(v)
    }

    /// The manifest.
    pub(crate) fn manifest(&mut self) -> Result<Vec<u8>> {
        let len = usize::try_from(self.u32()?).unwrap_or(usize::MAX);
        if len > MAX_MANIFEST {
            return Err(crate::bounds::too_large(
                "manifest bytes",
                MAX_MANIFEST as u64,
            ));
        }
        self.bytes(len)
    }

    /// Where the kernel state is.
    pub(crate) fn kernel_at(&mut self) -> Result<KernelAt> {
        match self.u8()? {
            0 => Ok(KernelAt::Absent),
            1 => Ok(KernelAt::Here),
            2 => Ok(KernelAt::AfterTree),
            b => Err(SnapshotError::malformed(format!("kernel-state marker {b}"))),
        }
    }

    /// Reads past the tree, checking only its framing (a restore checks the rest).
    pub(crate) fn skip_tree(&mut self) -> Result<()> {
        loop {
            match self.u8()? {
                tag::DIR => {
                    self.name()?;
                    self.meta()?;
                }
                tag::UP => {}
                tag::FILE => {
                    self.name()?;
                    self.meta()?;
                    self.skip_chunks()?;
                }
                tag::LINK => {
                    self.name()?;
                    self.target()?;
                }
                tag::END => {
                    self.u64()?;
                    self.u64()?;
                    return Ok(());
                }
                t => return Err(SnapshotError::malformed(format!("a record tagged {t}"))),
            }
        }
    }

    /// The next chunk's length; 0 ends the run.
    pub(crate) fn chunk_len(&mut self) -> Result<usize> {
        let len = usize::try_from(self.u32()?).unwrap_or(usize::MAX);
        if len > CHUNK_LEN {
            return Err(SnapshotError::malformed(format!("a chunk of {len} bytes")));
        }
        Ok(len)
    }

    /// Reads up to `buf.len()` bytes of the current chunk (the caller bounds `buf`).
    pub(crate) fn read_some(&mut self, buf: &mut [u8]) -> Result<()> {
        self.r
            .read_exact(buf)
            .map_err(|e| from_io(e, "read the snapshot"))
    }

    /// Skips a run of chunks.
    pub(crate) fn skip_chunks(&mut self) -> Result<()> {
        let mut buf = vec![0u8; CHUNK_LEN];
        loop {
            let len = self.chunk_len()?;
            if len == 0 {
                return Ok(());
            }
            self.read_some(&mut buf[..len])?;
        }
    }

    /// A validated name.
    pub(crate) fn name(&mut self) -> Result<Vec<u8>> {
        let len = usize::from(self.u8()?);
        let name = self.bytes(len)?;
        if !valid_name(&name) {
            return Err(SnapshotError::malformed(format!(
                "entry name {:?} is not one path segment",
                String::from_utf8_lossy(&name)
            )));
        }
        Ok(name)
    }

    /// A 'D' or 'F' record's metadata.
    pub(crate) fn meta(&mut self) -> Result<EntryMeta> {
        let mode = self.u32()?;
        let mtime = i64::from_le_bytes(self.array()?);
        let mtime_nsec = self.u32()?;
        if mtime_nsec >= 1_000_000_000 {
            return Err(SnapshotError::malformed("mtime nanoseconds out of range"));
        }
        Ok(EntryMeta {
            mode,
            mtime,
            mtime_nsec,
        })
    }

    /// A validated symlink target.
    pub(crate) fn target(&mut self) -> Result<Vec<u8>> {
        let len = usize::from(u16::from_le_bytes(self.array()?));
        if len > MAX_TARGET {
            return Err(SnapshotError::malformed("a symlink target over 4096 bytes"));
        }
        let t = self.bytes(len)?;
        if !valid_target(&t) {
            return Err(SnapshotError::malformed(
                "an empty symlink target or one with NUL",
            ));
        }
        Ok(t)
    }

    /// Checks that nothing follows.
    pub(crate) fn expect_end(&mut self) -> Result<()> {
        let mut b = [0u8; 1];
        match self.r.read(&mut b) {
            Ok(0) => Ok(()),
            Ok(_) => Err(SnapshotError::malformed("bytes after the end of the tree")),
            Err(e) => Err(from_io(e, "read the snapshot")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_single_segments() {
        assert!(valid_name(b"a"));
        assert!(valid_name(&[b'x'; 255]));
        for bad in [&b""[..], b".", b"..", b"a/b", b"/", b"a\0", &[b'x'; 256]] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    /// The kernel state is found before the tree (snapshots written before December 2026)
    /// and after it (since): reading past the tree reaches it, and a tree read with its
    /// records reaches the same place.
    #[test]
    fn kernel_state_is_read_before_or_after_the_tree() {
        let m = EntryMeta {
            mode: 0o755,
            mtime: 1,
            mtime_nsec: 0,
        };
        let tree = |out: &mut Vec<u8>| {
            put_entry(out, tag::DIR, b"work", m).unwrap();
            put_entry(out, tag::FILE, b"f", m).unwrap();
            put_chunk(out, b"file bytes").unwrap();
            put_chunks_end(out).unwrap();
            put_link(out, b"l", b"f").unwrap();
            out.push(tag::UP);
            put_end(out, 3, 10).unwrap();
        };
        let state = |out: &mut Vec<u8>| {
            put_chunk(out, b"state").unwrap();
            put_chunks_end(out).unwrap();
        };
        for at in [KernelAt::Here, KernelAt::AfterTree] {
            let mut out = Vec::new();
            put_manifest(&mut out, b"{}").unwrap();
            put_kernel_marker(&mut out, at).unwrap();
            if at == KernelAt::Here {
                state(&mut out);
            }
            tree(&mut out);
            if at == KernelAt::AfterTree {
                state(&mut out);
            }
            let mut inp = Input::new(&out[..]);
            inp.manifest().unwrap();
            assert_eq!(inp.kernel_at().unwrap(), at);
            if at == KernelAt::AfterTree {
                inp.skip_tree().unwrap();
            }
            assert_eq!(inp.chunk_len().unwrap(), 5, "{at:?}");
            let mut b = [0u8; 5];
            inp.read_some(&mut b).unwrap();
            assert_eq!(&b, b"state");
            assert_eq!(inp.chunk_len().unwrap(), 0);
        }
        let mut bad = Vec::new();
        put_manifest(&mut bad, b"{}").unwrap();
        bad.push(3);
        assert!(Input::new(&bad[..]).manifest().is_ok());
        let mut inp = Input::new(&bad[..]);
        inp.manifest().unwrap();
        assert!(inp.kernel_at().is_err());
    }

    #[test]
    fn records_round_trip() {
        let mut out = Vec::new();
        put_manifest(&mut out, b"{}").unwrap();
        out.push(1);
        put_chunk(&mut out, b"state").unwrap();
        put_chunks_end(&mut out).unwrap();
        let m = EntryMeta {
            mode: 0o1777,
            mtime: -5,
            mtime_nsec: 7,
        };
        put_entry(&mut out, tag::DIR, b"tmp", m).unwrap();
        put_link(&mut out, b"l", b"/etc").unwrap();
        put_end(&mut out, 2, 4).unwrap();
        let mut inp = Input::new(&out[..]);
        assert_eq!(inp.manifest().unwrap(), b"{}");
        assert_eq!(inp.kernel_at().unwrap(), KernelAt::Here);
        assert_eq!(inp.chunk_len().unwrap(), 5);
        let mut b = [0u8; 5];
        inp.read_some(&mut b).unwrap();
        assert_eq!(inp.chunk_len().unwrap(), 0);
        assert_eq!(inp.u8().unwrap(), tag::DIR);
        assert_eq!(inp.name().unwrap(), b"tmp");
        assert_eq!(inp.meta().unwrap(), m);
        assert_eq!(inp.u8().unwrap(), tag::LINK);
        assert_eq!(inp.name().unwrap(), b"l");
        assert_eq!(inp.target().unwrap(), b"/etc");
        assert_eq!(inp.u8().unwrap(), tag::END);
        assert_eq!((inp.u64().unwrap(), inp.u64().unwrap()), (2, 4));
        inp.expect_end().unwrap();
    }

    #[test]
    fn bad_lengths_are_refused_before_reading() {
        let big = (u32::try_from(MAX_MANIFEST).unwrap() + 1).to_le_bytes();
        assert!(matches!(
            Input::new(&big[..]).manifest(),
            Err(SnapshotError::TooLarge { .. })
        ));
        let chunk = (u32::try_from(CHUNK_LEN).unwrap() + 1).to_le_bytes();
        assert!(matches!(
            Input::new(&chunk[..]).chunk_len(),
            Err(SnapshotError::Malformed(_))
        ));
        let mut name = vec![2u8];
        name.extend_from_slice(b"..");
        assert!(matches!(
            Input::new(&name[..]).name(),
            Err(SnapshotError::Malformed(_))
        ));
        let cut = [3u8, b'a'];
        assert!(matches!(
            Input::new(&cut[..]).name(),
            Err(SnapshotError::Malformed(_))
        ));
    }
}
