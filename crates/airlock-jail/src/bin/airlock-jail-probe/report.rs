//! How a scenario reports: one line per check, and the errno of a failed call.

/// Prints a check and returns whether it held.
pub fn check(what: &str, ok: bool) -> bool {
    println!("{} {what}", if ok { "ok  " } else { "FAIL" });
    ok
}

/// The errno of the last failed call.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
