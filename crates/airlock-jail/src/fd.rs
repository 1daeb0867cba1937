//! Owned file descriptors at fixed numbers (the guest expects its socket at fd 3).
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{JailError, Result};

/// Duplicate `src` onto the exact descriptor number `target` (closing whatever was there) and
/// return ownership of it. The new descriptor does not have `FD_CLOEXEC` set.
pub fn dup_to(src: BorrowedFd<'_>, target: RawFd) -> Result<OwnedFd> {
    if target < 0 {
        return Err(JailError::InvalidInput(format!("negative fd {target}")));
    }
    // SAFETY: dup2 only touches the descriptor table; `src` is a valid open descriptor for the
    // lifetime of the borrow, and `target` is a plain number that dup2 validates itself.
    let rc = unsafe { libc::dup2(src.as_raw_fd(), target) };
    if rc < 0 {
        return Err(JailError::Sys {
            op: "dup2",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: dup2 succeeded, so `rc` (== target) is an open descriptor that nothing else in
    // this process owns: either it was free, or dup2 just closed what was there. The caller
    // gives up any other handle to that number by calling this function.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}
