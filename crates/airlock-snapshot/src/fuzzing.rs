//! Entry points for the cargo-fuzz targets (`fuzz/`; only with the `fuzzing` feature): the
//! functions [`crate::Snapshot`] runs on a body, without the store's verification in front,
//! so arbitrary bytes reach the block decoder, the payload parser and the restore.
use airlock_jail::dirfd::DirFd;

use crate::bounds::Bounds;
use crate::decode::Decoder;
use crate::error::Result;
use crate::payload::{Input, KernelAt, CHUNK_LEN};
use crate::restore::{restore_payload, RestoreInfo};

/// Parses `body` (the bytes after a snapshot's header) as [`crate::Snapshot`] does: the
/// manifest, the kernel state read to its end; the bytes of kernel state read.
pub fn read_body(body: &[u8]) -> Result<u64> {
    let mut input = Input::new(Decoder::new(body));
    input.manifest()?;
    match input.kernel_at()? {
        KernelAt::Absent => return Ok(0),
        KernelAt::Here => {}
        KernelAt::AfterTree => input.skip_tree()?,
    }
    let mut total = 0u64;
    let mut buf = vec![0u8; CHUNK_LEN];
    loop {
        let len = input.chunk_len()?;
        if len == 0 {
            return Ok(total);
        }
        input.read_some(&mut buf[..len])?;
        total += len as u64;
    }
}

/// Restores `body` beneath `root` as [`crate::Snapshot::restore_into`] does.
pub fn restore_body(body: &[u8], root: &DirFd, bounds: &Bounds) -> Result<RestoreInfo> {
    restore_payload(Input::new(Decoder::new(body)), root, bounds)
}

/// Restores a raw payload (no block framing) beneath `root`, so the fuzzer reaches the
/// record parser without having to make valid LZ4 blocks.
pub fn restore_payload_bytes(payload: &[u8], root: &DirFd, bounds: &Bounds) -> Result<RestoreInfo> {
    restore_payload(Input::new(payload), root, bounds)
}
