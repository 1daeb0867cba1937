//! Random bytes from the kernel's CSPRNG (`getrandom`), for the store key and temporary names.
use crate::error::{Result, SnapshotError};

/// `N` random bytes.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| SnapshotError::io("getrandom")(std::io::Error::from(e)))?;
    Ok(b)
}

/// A fresh temporary name, `.tmp-<16 hex digits>`.
pub(crate) fn temp_name() -> Result<String> {
    Ok(format!(".tmp-{}", hex::encode(random_bytes::<8>()?)))
}
