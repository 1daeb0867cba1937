//! Dropping every capability, and `no_new_privs`.

use crate::sys::{check, check_long};
use crate::{JailError, Result};

const CAPS_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The highest capability number this kernel knows (from `/proc/sys/kernel/cap_last_cap`,
/// or by probing `PR_CAPBSET_READ` when procfs is not readable).
fn last_cap() -> u32 {
    if let Ok(s) =
        crate::sys::read_bounded(std::path::Path::new("/proc/sys/kernel/cap_last_cap"), 32)
    {
        if let Ok(n) = s.trim().parse::<u32>() {
            return n;
        }
    }
    let mut n = 0;
    // Capabilities are numbered densely from 0; 63 is the most the 64-bit sets can hold.
    while n < 63 {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_CAPBSET_READ, libc::c_ulong::from(n + 1), 0, 0, 0) } < 0 {
            break;
        }
        n += 1;
    }
    n
}

/// Empties the bounding set, the ambient set, and the effective, permitted and inheritable
/// sets (in that order: the bounding-set drop needs `CAP_SETPCAP`, which `capset` removes).
pub fn drop_all() -> Result<()> {
    for cap in 0..=last_cap() {
        let cap = libc::c_ulong::from(cap);
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } == -1 {
            let err = std::io::Error::last_os_error();
            // Without CAP_SETPCAP the drop fails; that is fine only if it is already gone.
            // SAFETY: prctl with integer arguments only.
            let still = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) };
            if still != 0 {
                return Err(JailError::io("prctl(PR_CAPBSET_DROP)", err));
            }
        }
    }
    check(
        // SAFETY: prctl with integer arguments only.
        unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            )
        },
        "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
    )?;
    let header = CapHeader {
        version: CAPS_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: header and data are valid, correctly sized (version 3 takes two data elements).
    let r = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    check_long(r, "capset")?;
    if !effective_is_empty()? {
        return Err(JailError::InvalidInput(
            "capabilities survived capset".into(),
        ));
    }
    Ok(())
}

/// `PR_SET_NO_NEW_PRIVS`: execve can never grant privileges again (setuid bits, file caps).
pub fn set_no_new_privs() -> Result<()> {
    check(
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) },
        "prctl(PR_SET_NO_NEW_PRIVS)",
    )?;
    Ok(())
}

/// Whether `no_new_privs` is set.
pub fn no_new_privs() -> Result<bool> {
    let r = check(
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) },
        "prctl(PR_GET_NO_NEW_PRIVS)",
    )?;
    Ok(r == 1)
}

fn capget() -> Result<[CapData; 2]> {
    let header = CapHeader {
        version: CAPS_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header is valid; data has room for the two elements version 3 writes.
    let r = unsafe { libc::syscall(libc::SYS_capget, &header, data.as_mut_ptr()) };
    check_long(r, "capget")?;
    Ok(data)
}

/// Whether the effective capability set is empty.
pub fn effective_is_empty() -> Result<bool> {
    Ok(capget()?.iter().all(|d| d.effective == 0))
}

/// Whether the effective, permitted and inheritable sets are all empty.
pub fn all_sets_empty() -> Result<bool> {
    Ok(capget()?
        .iter()
        .all(|d| d.effective == 0 && d.permitted == 0 && d.inheritable == 0))
}
