//! Guest shapes: path grammar and argv quoting, nothing else.

use crate::vocab::vocabulary;

/// The guest operating-system family a backend hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OsFamily {
    /// POSIX paths and argv.
    Posix,
    /// Windows paths and argv.
    Windows,
}

vocabulary!(OsFamily, "os family", {
    Posix => "posix",
    Windows => "windows",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        assert_eq!("posix".parse::<OsFamily>(), Ok(OsFamily::Posix));
        assert_eq!("windows".parse::<OsFamily>(), Ok(OsFamily::Windows));
        assert!("linux".parse::<OsFamily>().is_err());
    }
}
