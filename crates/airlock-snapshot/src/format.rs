//! The on-disk format: a fixed header, then the body (LZ4 blocks of the payload).
//!
//! ```text
//! file   := header body
//! header := "AIRLSNAP" version:u32 flags:u32 body_len:u64 mac:[32]       (56 bytes, LE)
//! body   := block* end
//! block  := kind:u8 raw_len:u32 stored_len:u32 stored[stored_len]
//!           kind 1: LZ4 block of raw_len bytes; kind 2: raw_len bytes stored as they are
//! end    := 0:u8 0:u32 0:u32
//! ```
//!
//! The snapshot's id is the SHA-256 of the body; `mac` is HMAC-SHA256(store key, that
//! digest). A block holds at most [`BLOCK_LEN`] payload bytes, so a reader's buffers are
//! bounded whatever a file says. The payload the blocks carry is in `payload.rs`.
use crate::error::{Result, SnapshotError};

/// The file's first eight bytes.
pub(crate) const MAGIC: &[u8; 8] = b"AIRLSNAP";
/// The format version written and the only one read.
pub(crate) const VERSION: u32 = 1;
/// Length of the header.
pub(crate) const HEADER_LEN: usize = 56;
/// Most payload bytes in one block.
pub(crate) const BLOCK_LEN: usize = 1 << 20;
/// Length of a block's header.
pub(crate) const BLOCK_HEADER_LEN: usize = 9;

/// The kind of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// The end of the body.
    End,
    /// An LZ4 block.
    Lz4,
    /// Bytes stored as they are (what did not compress).
    Stored,
}

impl BlockKind {
    pub(crate) fn byte(self) -> u8 {
        match self {
            BlockKind::End => 0,
            BlockKind::Lz4 => 1,
            BlockKind::Stored => 2,
        }
    }

    fn from_byte(b: u8) -> Result<BlockKind> {
        match b {
            0 => Ok(BlockKind::End),
            1 => Ok(BlockKind::Lz4),
            2 => Ok(BlockKind::Stored),
            _ => Err(SnapshotError::malformed(format!("unknown block kind {b}"))),
        }
    }
}

/// The most stored bytes a block may have: what LZ4 may expand a full block to.
pub(crate) fn max_stored_len() -> usize {
    lz4_flex::block::get_maximum_output_size(BLOCK_LEN)
}

/// A block's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    pub(crate) kind: BlockKind,
    pub(crate) raw_len: usize,
    pub(crate) stored_len: usize,
}

impl BlockHeader {
    pub(crate) fn encode(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut out = [0u8; BLOCK_HEADER_LEN];
        out[0] = self.kind.byte();
        out[1..5].copy_from_slice(&len_u32(self.raw_len).to_le_bytes());
        out[5..9].copy_from_slice(&len_u32(self.stored_len).to_le_bytes());
        out
    }

    /// Parses and checks a block header: lengths within the bounds, consistent with the kind.
    pub(crate) fn decode(b: &[u8; BLOCK_HEADER_LEN]) -> Result<BlockHeader> {
        let kind = BlockKind::from_byte(b[0])?;
        let raw_len = usize::try_from(le_u32(&b[1..5])).unwrap_or(usize::MAX);
        let stored_len = usize::try_from(le_u32(&b[5..9])).unwrap_or(usize::MAX);
        let ok = match kind {
            BlockKind::End => raw_len == 0 && stored_len == 0,
            BlockKind::Stored => raw_len == stored_len && (1..=BLOCK_LEN).contains(&raw_len),
            BlockKind::Lz4 => {
                (1..=BLOCK_LEN).contains(&raw_len) && (1..=max_stored_len()).contains(&stored_len)
            }
        };
        if !ok {
            return Err(SnapshotError::malformed(format!(
                "bad block lengths ({raw_len} raw, {stored_len} stored)"
            )));
        }
        Ok(BlockHeader {
            kind,
            raw_len,
            stored_len,
        })
    }
}

/// The file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Bytes of body after the header.
    pub(crate) body_len: u64,
    /// HMAC-SHA256(key, SHA-256(body)).
    pub(crate) mac: [u8; 32],
}

impl Header {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&self.body_len.to_le_bytes());
        out[24..].copy_from_slice(&self.mac);
        out
    }

    /// Parses a header: the magic, the one version read, no flags.
    pub(crate) fn decode(b: &[u8; HEADER_LEN]) -> Result<Header> {
        if &b[..8] != MAGIC {
            return Err(SnapshotError::malformed("not a snapshot file (bad magic)"));
        }
        let version = le_u32(&b[8..12]);
        if version != VERSION {
            return Err(SnapshotError::malformed(format!(
                "format version {version} (this build reads {VERSION})"
            )));
        }
        if le_u32(&b[12..16]) != 0 {
            return Err(SnapshotError::malformed("unknown header flags"));
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[16..24]);
        let mut mac = [0u8; 32];
        mac.copy_from_slice(&b[24..]);
        Ok(Header {
            body_len: u64::from_le_bytes(len),
            mac,
        })
    }
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// A block length as written (every length here is at most [`max_stored_len`]).
fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_checks() {
        let h = Header {
            body_len: 12345,
            mac: [7; 32],
        };
        let mut b = h.encode();
        assert_eq!(Header::decode(&b).unwrap(), h);
        b[8] = 2;
        assert!(matches!(
            Header::decode(&b),
            Err(SnapshotError::Malformed(_))
        ));
        let mut b = h.encode();
        b[0] = b'X';
        assert!(matches!(
            Header::decode(&b),
            Err(SnapshotError::Malformed(_))
        ));
        let mut b = h.encode();
        b[12] = 1;
        assert!(matches!(
            Header::decode(&b),
            Err(SnapshotError::Malformed(_))
        ));
    }

    #[test]
    fn block_header_bounds() {
        let ok = |kind, raw_len, stored_len| {
            BlockHeader::decode(
                &BlockHeader {
                    kind,
                    raw_len,
                    stored_len,
                }
                .encode(),
            )
            .is_ok()
        };
        assert!(ok(BlockKind::End, 0, 0));
        assert!(!ok(BlockKind::End, 1, 0));
        assert!(ok(BlockKind::Stored, 5, 5));
        assert!(!ok(BlockKind::Stored, 5, 4));
        assert!(!ok(BlockKind::Stored, BLOCK_LEN + 1, BLOCK_LEN + 1));
        assert!(ok(BlockKind::Lz4, BLOCK_LEN, 10));
        assert!(!ok(BlockKind::Lz4, 0, 10));
        assert!(!ok(BlockKind::Lz4, 10, max_stored_len() + 1));
        let mut b = BlockHeader {
            kind: BlockKind::End,
            raw_len: 0,
            stored_len: 0,
        }
        .encode();
        b[0] = 9;
        assert!(BlockHeader::decode(&b).is_err());
    }
}
