//! One layer: a tar stream, gzip-compressed or not, applied entry by entry; its diff ID (the
//! digest of the uncompressed tar) comes back for the caller to check against the image
//! config. The whole stream is read, the tail after the end-of-archive blocks too, so the
//! digests cover every byte.
use std::io::{BufRead, BufReader, Read};

use flate2::read::MultiGzDecoder;

use super::apply::Applier;
use crate::bounds::Budget;
use crate::digest::{Digest, Hashing};
use crate::error::{ImageError, Result};
use crate::tar::TarReader;

const GZIP: [u8; 2] = [0x1f, 0x8b];
const ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Applies the layer read from `raw` (which is read to its end) and returns its diff ID.
pub fn apply_layer(
    raw: impl Read,
    applier: &mut Applier<'_>,
    budget: &mut Budget,
) -> Result<Digest> {
    let mut raw = BufReader::new(raw);
    let head = raw
        .fill_buf()
        .map_err(ImageError::io("read layer"))?
        .to_vec();
    if head.starts_with(&ZSTD) {
        return Err(ImageError::Tar(
            "zstd-compressed layers are not supported; save the image uncompressed or with \
             gzip (podman save --format oci-archive does)"
                .into(),
        ));
    }
    applier.start_layer();
    if head.starts_with(&GZIP) {
        let mut gz = MultiGzDecoder::new(raw);
        let diff = apply_tar(&mut gz, applier, budget)?;
        let mut raw = gz.into_inner();
        drain(&mut raw, budget.bounds().max_bytes)?;
        Ok(diff)
    } else {
        apply_tar(&mut raw, applier, budget)
    }
}

/// Applies an uncompressed tar stream (read to its end, within the byte bound).
fn apply_tar(stream: impl Read, applier: &mut Applier<'_>, budget: &mut Budget) -> Result<Digest> {
    let mut hashed = Hashing::new(stream);
    let max_path = budget.bounds().max_path;
    {
        let mut tar = TarReader::new(&mut hashed, max_path);
        while let Some(entry) = tar.next_entry(budget)? {
            applier.apply(&entry, &mut tar.body(), budget)?;
        }
    }
    let left = budget.bounds().max_bytes.saturating_sub(budget.bytes());
    hashed.finish(left).map_err(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            ImageError::Bound {
                what: "bytes",
                limit: budget.bounds().max_bytes,
                fix: "raise it with --max-bytes if the image is really this large",
            }
        } else {
            ImageError::Tar(format!("read: {e}"))
        }
    })
}

/// Reads what is left of a compressed stream (its trailer, or garbage a digest still covers).
fn drain(raw: &mut impl Read, cap: u64) -> Result<()> {
    std::io::copy(&mut raw.take(cap), &mut std::io::sink())
        .map(drop)
        .map_err(ImageError::io("read layer"))
}
