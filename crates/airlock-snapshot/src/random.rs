//! Random bytes from the kernel (`/dev/urandom`), for the store key and temporary names.
use std::fs::File;
use std::io::Read;

use crate::error::{Result, SnapshotError};
use crate::id::hex;

/// `N` random bytes.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(SnapshotError::io("read /dev/urandom"))?;
    Ok(b)
}

/// A fresh temporary name, `.tmp-<16 hex digits>`.
pub(crate) fn temp_name() -> Result<String> {
    Ok(format!(".tmp-{}", hex(&random_bytes::<8>()?)))
}
