//! The network namespace's one interface: bring `lo` up, and list what interfaces exist.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::sys::check;

/// `IFF_UP` and `IFF_RUNNING` (linux/if.h) in the `c_short` width of `ifr_flags`.
pub(crate) const IFF_UP: libc::c_short = 0x1;
const IFF_RUNNING: libc::c_short = 0x40;
use crate::{JailError, Result};

/// A socket to ask about `lo`, and its current `ifreq` (name set, flags read).
fn loopback_request() -> Result<(OwnedFd, libc::ifreq)> {
    let raw = check(
        // SAFETY: socket only takes integers.
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
        "socket(AF_INET) for loopback ioctl",
    )?;
    // SAFETY: `raw` is a fresh fd we own; OwnedFd closes it on drop.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    check(
        // SAFETY: SIOCGIFFLAGS reads ifr_name and writes ifr_flags inside `req`, which we own.
        unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) },
        "ioctl(SIOCGIFFLAGS, lo)",
    )?;
    Ok((sock, req))
}

/// Brings the loopback interface up (`IFF_UP`) in the current network namespace.
pub fn loopback_up() -> Result<()> {
    let (sock, mut req) = loopback_request()?;
    // SAFETY: SIOCGIFFLAGS just filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | IFF_UP | IFF_RUNNING;
    check(
        // SAFETY: SIOCSIFFLAGS reads `req`, which is fully initialised.
        unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) },
        "ioctl(SIOCSIFFLAGS, lo up)",
    )?;
    Ok(())
}

/// Names of every network interface in the current network namespace.
pub fn interface_names() -> Result<Vec<String>> {
    // SAFETY: if_nameindex allocates an array we free below; null means failure.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        return Err(JailError::last_os("if_nameindex"));
    }
    let mut names = Vec::new();
    let mut cur = list;
    // The array ends with an entry whose index is 0 and name is null; bound the walk anyway.
    for _ in 0..4096 {
        // SAFETY: `cur` points into the array, which is terminated by a zero entry that we stop at.
        let entry = unsafe { &*cur };
        if entry.if_index == 0 || entry.if_name.is_null() {
            break;
        }
        // SAFETY: if_name is a NUL-terminated string owned by the array.
        let name = unsafe { CStr::from_ptr(entry.if_name) };
        names.push(name.to_string_lossy().into_owned());
        // SAFETY: the terminator has not been reached, so the next element exists.
        cur = unsafe { cur.add(1) };
    }
    // SAFETY: `list` came from if_nameindex and is freed exactly once.
    unsafe { libc::if_freenameindex(list) };
    Ok(names)
}

/// Whether `lo` is up (`IFF_UP`) in the current network namespace.
pub fn loopback_is_up() -> Result<bool> {
    let (_sock, req) = loopback_request()?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok(flags & IFF_UP != 0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn flag_constants_match_libc() {
        assert_eq!(i32::from(super::IFF_UP), libc::IFF_UP);
        assert_eq!(i32::from(super::IFF_RUNNING), libc::IFF_RUNNING);
    }
}
