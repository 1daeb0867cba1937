//! Small private helpers shared by the syscall wrappers: errno checks, C strings, bounded reads.

use std::ffi::CString;
use std::io::Read;
use std::path::Path;

use crate::{JailError, Result};

/// Turns a `-1`-on-error return value into a [`Result`], capturing `errno`.
pub(crate) fn check(ret: libc::c_int, op: &'static str) -> Result<libc::c_int> {
    if ret == -1 {
        Err(JailError::last_os(op))
    } else {
        Ok(ret)
    }
}

/// Same as [`check`] for `syscall(2)`, which returns a `c_long`.
pub(crate) fn check_long(ret: libc::c_long, op: &'static str) -> Result<libc::c_long> {
    if ret == -1 {
        Err(JailError::last_os(op))
    } else {
        Ok(ret)
    }
}

/// A path as a C string; paths with interior NUL bytes are refused.
pub(crate) fn cpath(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        JailError::InvalidInput(format!("path {} contains a NUL byte", path.display()))
    })
}

/// A string as a C string; strings with interior NUL bytes are refused.
pub(crate) fn cstr(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| JailError::InvalidInput(format!("{s:?} contains a NUL byte")))
}

/// Reads at most `limit` bytes of a file as (lossy) UTF-8. Kernel files can be large or
/// attacker-influenced (a guest controls its own `/proc/<pid>/*`), so every read is bounded.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    file.take(limit).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Writes `data` to an existing file in one `write(2)` (as procfs/cgroupfs expect).
pub(crate) fn write_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(data)
}

/// The current `errno`.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
