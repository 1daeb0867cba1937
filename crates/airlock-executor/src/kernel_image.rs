//! A paused kernel's process image, as the broker writes it and a restoring stage reads it:
//! [`MAGIC`], the header's length (u64, little-endian), the [`Header`] (JSON), then the bytes
//! of every fill range of every region, in order.
//!
//! The broker makes it from a stopped kernel (`airlock-broker/src/kernel/image.rs`); a stage
//! started to restore one ([`crate::config::ExecutorConfig::restore_image`]) reads it from
//! [`crate::config::KERNEL_IMAGE_FD`] once every layer is in force and becomes it
//! (`airlock_jail::image::restore`). The bytes are the sandbox's own memory and run only
//! inside a sandbox of the same spec; the header is checked before anything is changed.
use std::ffi::CString;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;

use airlock_jail::image::{Plan, PlanRegion, RegionKind, Registers, SigAction};
use serde::{Deserialize, Serialize};

/// The first bytes of an image (a pickled state starts otherwise).
pub const MAGIC: &[u8; 16] = b"AIRLOCK-IMAGE/1\n";

/// Largest header a stage reads.
pub const MAX_HEADER: u64 = 16 << 20;

/// Most regions an image may have (the kernel's own `vm.max_map_count` default).
pub const MAX_REGIONS: usize = 65_530;

/// What the image holds besides its bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Header {
    /// Every mapping, in address order.
    pub regions: Vec<Region>,
    /// r8–r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags.
    pub registers: [u64; 18],
    /// The thread pointer.
    pub fs_base: u64,
    /// `start_code, end_code, start_data, end_data, start_brk, brk, start_stack, arg_start,
    /// arg_end, env_start, env_end`.
    pub layout: [u64; 11],
    /// `[signal, handler, flags, restorer, mask]` for each signal the kernel reported.
    pub sigactions: Vec<[u64; 5]>,
    /// Blocked signals.
    pub sigmask: u64,
    /// The restartable-sequence area glibc registered: address and length.
    pub rseq: Option<(u64, u32)>,
    /// The working directory (inside the sandbox).
    pub cwd: String,
}

/// One mapping of the image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// `PROT_*` bits.
    pub prot: u32,
    /// What it is.
    pub kind: Kind,
    /// Its bytes follow in the stream (a region whose pages were never touched has none:
    /// the broker splits a mapping where its pages start or stop being present).
    pub fill: bool,
}

/// What a region is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Kind {
    /// Anonymous memory.
    Anon,
    /// The main thread's stack.
    Stack,
    /// A private mapping of a file inside the sandbox.
    File {
        /// Its absolute path in the sandbox.
        path: String,
        /// Offset into the file.
        offset: u64,
        /// The file's size and modification time when the image was made: a restore into a
        /// sandbox whose file differs is refused.
        size: u64,
        /// Seconds and nanoseconds.
        mtime: (i64, i64),
        /// Mapped shared (read-only: a writable shared mapping is never imaged).
        #[serde(default)]
        shared: bool,
    },
    /// `[vdso]`, `[vvar]`, `[vvar_vclock]`.
    Special {
        /// The name in `/proc/PID/maps`.
        name: String,
    },
}

/// Why an image cannot be restored here.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Reading it failed.
    #[error("the kernel image could not be read: {0}")]
    Io(#[from] std::io::Error),
    /// It is not an image, or not a well-formed one.
    #[error("the kernel image is malformed: {0}")]
    Malformed(String),
    /// A file the image maps is not the one it mapped.
    #[error("the kernel image maps {0}, which changed since it was made")]
    Changed(String),
}

/// Read the header from `source`, leaving it at the first fill byte.
pub fn read_header(mut source: impl Read) -> Result<Header, ImageError> {
    let mut magic = [0u8; 16];
    source.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(ImageError::Malformed("no image magic".into()));
    }
    let mut len = [0u8; 8];
    source.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_HEADER {
        return Err(ImageError::Malformed(format!("a header of {len} bytes")));
    }
    let mut header = vec![0u8; usize::try_from(len).unwrap_or(0)];
    source.read_exact(&mut header)?;
    let header: Header =
        serde_json::from_slice(&header).map_err(|e| ImageError::Malformed(e.to_string()))?;
    if header.regions.len() > MAX_REGIONS {
        return Err(ImageError::Malformed("too many regions".into()));
    }
    Ok(header)
}

impl Header {
    /// `(address, length)` of each region whose bytes follow the header, in stream order.
    pub fn filled(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.regions
            .iter()
            .filter(|r| r.fill)
            .map(|r| (r.start, r.end.saturating_sub(r.start)))
    }

    /// How many bytes follow the header: every filled region's (the whole image is the
    /// encoded header's length and this).
    #[must_use]
    pub fn filled_len(&self) -> u64 {
        self.filled().map(|(_, len)| len).sum()
    }
}

/// The header as bytes: [`MAGIC`], length, JSON.
pub fn encode_header(header: &Header) -> Vec<u8> {
    let json = serde_json::to_vec(header).unwrap_or_default();
    let mut out = Vec::with_capacity(json.len() + 24);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    out
}

/// The jail's regions for `header`, each file checked against what it was.
pub fn plan_regions(header: &Header) -> Result<Vec<PlanRegion>, ImageError> {
    header.regions.iter().map(plan_region).collect()
}

fn plan_region(r: &Region) -> Result<PlanRegion, ImageError> {
    let kind = match &r.kind {
        Kind::Anon => RegionKind::Anon,
        Kind::Stack => RegionKind::Stack,
        Kind::Special { name } => RegionKind::Special(name.clone()),
        Kind::File {
            path,
            offset,
            size,
            mtime,
            shared,
        } => {
            let meta = std::fs::metadata(path).map_err(|_| ImageError::Changed(path.clone()))?;
            if meta.size() != *size || (meta.mtime(), meta.mtime_nsec()) != *mtime {
                return Err(ImageError::Changed(path.clone()));
            }
            let path = CString::new(path.as_bytes())
                .map_err(|_| ImageError::Malformed("a path with a NUL".into()))?;
            RegionKind::File {
                path,
                offset: *offset,
                shared: *shared,
            }
        }
    };
    Ok(PlanRegion {
        start: r.start,
        end: r.end,
        prot: r.prot,
        kind,
        fill: r.fill,
    })
}

/// The frames of the restore's exchange on the socket: the stage's `mapped` (every region
/// mapped, the broker may write their bytes), the broker's `filled`, the stage's `restored`.
#[derive(Debug)]
pub struct Frames {
    /// `mapped`, as sent.
    pub mapped: Vec<u8>,
    /// The length of `filled` as the broker sends it.
    pub filled_len: usize,
    /// `restored`, as sent.
    pub restored: Vec<u8>,
}

/// Method names of [`Frames`].
pub const MAPPED: &str = "mapped";
/// See [`MAPPED`].
pub const FILLED: &str = "filled";
/// See [`MAPPED`].
pub const RESTORED: &str = "restored";

/// A notification with no params, framed as sent.
pub fn frame(method: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let msg = airlock_protocol::Message::notification(method, None);
    // Writing into a Vec cannot fail.
    let _ = airlock_protocol::write_message(&mut out, &msg);
    out
}

impl Frames {
    /// The three frames.
    #[must_use]
    pub fn new() -> Frames {
        Frames {
            mapped: frame(MAPPED),
            filled_len: frame(FILLED).len(),
            restored: frame(RESTORED),
        }
    }
}

impl Default for Frames {
    fn default() -> Self {
        Frames::new()
    }
}

/// The jail's plan for `header` over `regions` (from [`plan_regions`]).
pub fn plan<'a>(
    header: &Header,
    regions: &'a [PlanRegion],
    sigactions: &'a [SigAction],
    socket: BorrowedFd<'a>,
    frames: &'a Frames,
) -> Plan<'a> {
    Plan {
        regions,
        registers: Registers {
            gpr: header.registers,
            fs_base: header.fs_base,
        },
        layout: header.layout,
        sigactions,
        sigmask: header.sigmask,
        rseq: header.rseq,
        socket,
        mapped: &frames.mapped,
        filled_len: frames.filled_len,
        done: &frames.restored,
    }
}

/// The header's signal actions for the jail.
pub fn sigactions(header: &Header) -> Vec<SigAction> {
    header
        .sigactions
        .iter()
        .filter_map(|a| {
            Some(SigAction {
                signal: u32::try_from(a[0]).ok()?,
                handler: a[1],
                flags: a[2],
                restorer: a[3],
                mask: a[4],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            regions: vec![Region {
                start: 0x1000,
                end: 0x3000,
                prot: 3,
                kind: Kind::Anon,
                fill: true,
            }],
            registers: [7; 18],
            fs_base: 0x7000,
            layout: [1; 11],
            sigactions: vec![[2, 0x1234, 0, 0, 0]],
            sigmask: 0,
            rseq: Some((0x7800, 32)),
            cwd: "/work".into(),
        }
    }

    #[test]
    fn a_header_reads_back_as_written_and_leaves_the_stream_at_its_bytes() {
        let mut bytes = encode_header(&header());
        bytes.extend_from_slice(b"FILL");
        let mut cursor = std::io::Cursor::new(bytes);
        assert_eq!(read_header(&mut cursor).unwrap(), header());
        let mut rest = Vec::new();
        cursor.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"FILL");
    }

    #[test]
    fn what_is_not_an_image_or_too_large_is_refused_before_it_is_parsed() {
        let pickle = b"\x80\x05pickled state, not an image".to_vec();
        assert!(matches!(
            read_header(&pickle[..]),
            Err(ImageError::Malformed(_))
        ));
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&(MAX_HEADER + 1).to_le_bytes());
        assert!(matches!(
            read_header(&huge[..]),
            Err(ImageError::Malformed(_))
        ));
        let mut cut = encode_header(&header());
        cut.truncate(cut.len() - 3);
        assert!(matches!(read_header(&cut[..]), Err(ImageError::Io(_))));
    }

    #[test]
    fn a_mapped_file_that_changed_is_refused_naming_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"the library").unwrap();
        let m = std::fs::metadata(&path).unwrap();
        let mut h = header();
        h.regions[0].kind = Kind::File {
            path: path.display().to_string(),
            offset: 0,
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            shared: false,
        };
        assert!(plan_regions(&h).is_ok());
        std::fs::write(&path, b"another library, longer").unwrap();
        match plan_regions(&h) {
            Err(ImageError::Changed(p)) => assert_eq!(p, path.display().to_string()),
            other => panic!("{other:?}"),
        }
    }
}
