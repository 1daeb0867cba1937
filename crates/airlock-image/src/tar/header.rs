//! One 512-byte tar header, parsed without I/O: ustar, GNU and PAX headers, as written by GNU
//! tar, bsdtar, Go's archive/tar (podman, docker) and Python's tarfile.
use crate::error::{ImageError, Result};

/// The tar block size.
pub const BLOCK: usize = 512;

/// What a header describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file (`0`, NUL, or `7`).
    File,
    /// A hard link to an earlier entry (`1`).
    HardLink,
    /// A symbolic link (`2`).
    Symlink,
    /// A character device (`3`).
    CharDevice,
    /// A block device (`4`).
    BlockDevice,
    /// A directory (`5`).
    Directory,
    /// A named pipe (`6`).
    Fifo,
    /// The next entry's long path (GNU `L`).
    GnuLongName,
    /// The next entry's long link target (GNU `K`).
    GnuLongLink,
    /// PAX records for the next entry (`x`).
    Pax,
    /// PAX records for the whole archive (`g`).
    PaxGlobal,
}

/// The fields of a header the importer uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// What it is.
    pub kind: Kind,
    /// Its path (ustar prefix and name joined), as written.
    pub name: Vec<u8>,
    /// The link target (hard and symbolic links), as written.
    pub link: Vec<u8>,
    /// Permission, set-id and sticky bits.
    pub mode: u32,
    /// Bytes of content that follow the header.
    pub size: u64,
    /// Modification time (seconds since the epoch; 0 when unreadable).
    pub mtime: i64,
}

fn tar_err(m: impl Into<String>) -> ImageError {
    ImageError::Tar(m.into())
}

/// Parses one header block; `None` is a zero block (the end of the archive).
pub fn parse(block: &[u8; BLOCK]) -> Result<Option<Header>> {
    if block.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    check_sum(block)?;
    let kind = kind(block[156], &block[0..100])?;
    let mut name = cstr(&block[0..100]).to_vec();
    let posix = &block[257..263] == b"ustar\0";
    let prefix = cstr(&block[345..500]);
    if posix && !prefix.is_empty() {
        let mut joined = prefix.to_vec();
        joined.push(b'/');
        joined.extend_from_slice(&name);
        name = joined;
    }
    let size = number(&block[124..136]).map_err(|e| tar_err(format!("size: {e}")))?;
    let mode = number(&block[100..108]).map_err(|e| tar_err(format!("mode: {e}")))?;
    Ok(Some(Header {
        kind,
        name,
        link: cstr(&block[157..257]).to_vec(),
        mode: u32::try_from(mode & 0o7777).unwrap_or(0),
        size,
        mtime: number(&block[136..148])
            .ok()
            .and_then(|t| i64::try_from(t).ok())
            .unwrap_or(0),
    }))
}

fn kind(flag: u8, name: &[u8]) -> Result<Kind> {
    Ok(match flag {
        // A V7 archive marks directories only by the trailing slash.
        b'0' | 0 if cstr(name).ends_with(b"/") => Kind::Directory,
        b'0' | 0 | b'7' => Kind::File,
        b'1' => Kind::HardLink,
        b'2' => Kind::Symlink,
        b'3' => Kind::CharDevice,
        b'4' => Kind::BlockDevice,
        b'5' => Kind::Directory,
        b'6' => Kind::Fifo,
        b'L' => Kind::GnuLongName,
        b'K' => Kind::GnuLongLink,
        b'x' | b'X' => Kind::Pax,
        b'g' => Kind::PaxGlobal,
        b'S' => return Err(tar_err("sparse files are not supported")),
        b'M' | b'V' => return Err(tar_err("multi-volume archives are not supported")),
        other => {
            return Err(tar_err(format!(
                "entry type {:?} is not supported",
                char::from(other)
            )))
        }
    })
}

/// The bytes of a NUL-padded field up to its first NUL.
fn cstr(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    &field[..end]
}

/// The header checksum: the sum of all bytes with the checksum field read as spaces
/// (unsigned, or signed as some old writers did).
fn check_sum(block: &[u8; BLOCK]) -> Result<()> {
    let want = number(&block[148..156]).map_err(|e| tar_err(format!("checksum: {e}")))?;
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { *b };
        unsigned += u64::from(b);
        signed += i64::from(b.cast_signed());
    }
    if want == unsigned || i64::try_from(want).is_ok_and(|w| w == signed) {
        Ok(())
    } else {
        Err(tar_err(
            "bad header checksum (not a tar archive, or a corrupt one)",
        ))
    }
}

/// An octal field (NUL- or space-terminated, leading spaces allowed) or a GNU base-256 one.
pub fn number(field: &[u8]) -> std::result::Result<u64, &'static str> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        if field[0] != 0x80 {
            return Err("negative base-256 number");
        }
        let rest = &field[1..];
        let (high, low) = rest.split_at(rest.len().saturating_sub(8));
        if high.iter().any(|b| *b != 0) {
            return Err("base-256 number too large");
        }
        return Ok(low.iter().fold(0u64, |a, b| a << 8 | u64::from(*b)));
    }
    let digits = field
        .iter()
        .skip_while(|b| **b == b' ')
        .take_while(|b| (b'0'..=b'7').contains(*b));
    let mut n: u64 = 0;
    let mut len = 0;
    for d in digits {
        n = n
            .checked_mul(8)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or("octal number too large")?;
        len += 1;
    }
    let lead = field.iter().take_while(|b| **b == b' ').count();
    if field[lead + len..].iter().any(|b| *b != 0 && *b != b' ') {
        return Err("not an octal number");
    }
    Ok(n)
}

/// A header block for tests and the fixtures of other crates' tests.
#[must_use]
pub fn encode(kind: u8, name: &[u8], link: &[u8], mode: u32, size: u64) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    b[..name.len().min(100)].copy_from_slice(&name[..name.len().min(100)]);
    b[100..107].copy_from_slice(format!("{mode:07o}").as_bytes());
    b[108..115].copy_from_slice(b"0000000");
    b[116..123].copy_from_slice(b"0000000");
    b[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    b[136..147].copy_from_slice(b"14000000000");
    b[156] = kind;
    b[157..157 + link.len().min(100)].copy_from_slice(&link[..link.len().min(100)]);
    b[257..263].copy_from_slice(b"ustar\0");
    b[263..265].copy_from_slice(b"00");
    b[148..156].copy_from_slice(b"        ");
    let sum: u32 = b.iter().map(|x| u32::from(*x)).sum();
    b[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    b
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_written_header_reads_back() {
        let b = encode(b'0', b"usr/bin/x", b"", 0o4755, 12);
        let h = parse(&b).unwrap().unwrap();
        assert_eq!(h.kind, Kind::File);
        assert_eq!(h.name, b"usr/bin/x");
        assert_eq!(h.mode, 0o4755);
        assert_eq!(h.size, 12);
        assert_eq!(h.mtime, 0o14000000000);
        assert_eq!(parse(&[0u8; BLOCK]).unwrap(), None);
    }

    #[test]
    fn bad_checksums_types_and_numbers_are_refused() {
        let mut b = encode(b'0', b"a", b"", 0o644, 1);
        b[0] = b'b';
        assert!(parse(&b).is_err());
        assert!(parse(&encode(b'S', b"a", b"", 0o644, 1)).is_err());
        assert!(parse(&encode(b'?', b"a", b"", 0o644, 1)).is_err());
        assert_eq!(number(b"0000644\0"), Ok(0o644));
        assert_eq!(number(b"   644 \0"), Ok(0o644));
        assert!(number(b"12x4\0").is_err());
        assert!(number(b"77777777777777777777777").is_err());
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[11] = 5;
        assert_eq!(number(&big), Ok(5));
        big[0] = 0xff;
        assert!(number(&big).is_err());
    }

    #[test]
    fn a_ustar_prefix_joins_the_name_and_v7_directories_are_seen() {
        let mut b = encode(b'0', b"name", b"", 0o644, 0);
        b[345..351].copy_from_slice(b"prefix");
        b[148..156].copy_from_slice(b"        ");
        let sum: u32 = b.iter().map(|x| u32::from(*x)).sum();
        b[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        assert_eq!(parse(&b).unwrap().unwrap().name, b"prefix/name");
        let d = encode(0, b"dir/", b"", 0o755, 0);
        assert_eq!(parse(&d).unwrap().unwrap().kind, Kind::Directory);
    }
}
