//! The restricted language profile (opt-in per sandbox): the builtins a program may use and the
//! modules it may not import, from the two-process reference's restricted-Python engine.
//!
//! It is a language-level guard, not a boundary: a determined program escapes it (the
//! `__subclasses__` walk reaches modules the bootstrap imported), and the OS layers contain
//! what follows. The isolation ladder's `runtime` rung is what this layer alone would be;
//! enabling it changes no backend's declared rung.
use std::collections::BTreeSet;

/// Builtins a restricted program keeps by default: data, arithmetic, iteration, printing,
/// exceptions. Not `open`, `exec`, `eval`, `compile`, `getattr`/`setattr`/`delattr`,
/// `globals`/`locals`/`vars`, `input`, `breakpoint`, `memoryview`, `help`.
pub const DEFAULT_BUILTINS: &[&str] = &[
    "abs",
    "all",
    "any",
    "ascii",
    "bin",
    "bool",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "complex",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "filter",
    "float",
    "format",
    "frozenset",
    "hash",
    "hex",
    "id",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "object",
    "oct",
    "ord",
    "pow",
    "print",
    "property",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "zip",
    "exit",
    "quit",
    "True",
    "False",
    "None",
    "NotImplemented",
    "Ellipsis",
];

/// Modules (and their submodules) a restricted program may not import by default: the
/// process, the filesystem, the network, the interpreter's internals.
pub const DEFAULT_BLOCKED_IMPORTS: &[&str] = &[
    "os",
    "posix",
    "sys",
    "subprocess",
    "_posixsubprocess",
    "socket",
    "_socket",
    "ctypes",
    "_ctypes",
    "importlib",
    "builtins",
    "io",
    "_io",
    "pathlib",
    "shutil",
    "tempfile",
    "glob",
    "signal",
    "_signal",
    "threading",
    "_thread",
    "multiprocessing",
    "concurrent",
    "asyncio",
    "gc",
    "inspect",
    "mmap",
    "fcntl",
    "resource",
    "pty",
    "tty",
    "termios",
    "marshal",
    "pickle",
    "code",
    "codeop",
    "runpy",
    "pkgutil",
    "zipimport",
    "site",
    "sysconfig",
    "faulthandler",
    "tracemalloc",
    "pdb",
    "ssl",
    "http",
    "urllib",
    "ftplib",
    "smtplib",
    "selectors",
    "select",
];

/// The restricted profile: builtins allowed (every exception class is always kept) and
/// imports blocked (a name blocks itself and every submodule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestrictedProfile {
    /// Builtin names a program may use.
    pub builtins: BTreeSet<String>,
    /// Module names a program may not import.
    pub blocked_imports: BTreeSet<String>,
}

impl Default for RestrictedProfile {
    fn default() -> Self {
        let owned = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect();
        RestrictedProfile {
            builtins: owned(DEFAULT_BUILTINS),
            blocked_imports: owned(DEFAULT_BLOCKED_IMPORTS),
        }
    }
}

/// A Python identifier or dotted module name (ASCII), as policy.toml may list.
#[must_use]
pub fn valid_name(name: &str, dotted: bool) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.split('.').count() <= if dotted { 16 } else { 1 }
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_names_and_keep_the_dangerous_builtins_out() {
        let p = RestrictedProfile::default();
        assert!(p.builtins.iter().all(|b| valid_name(b, false)));
        assert!(p.blocked_imports.iter().all(|b| valid_name(b, true)));
        for b in [
            "open",
            "exec",
            "eval",
            "compile",
            "getattr",
            "__import__",
            "globals",
        ] {
            assert!(!p.builtins.contains(b), "{b}");
        }
        assert!(p.blocked_imports.contains("os") && p.blocked_imports.contains("ctypes"));
    }

    #[test]
    fn names_are_identifiers_and_dotted_only_where_allowed() {
        assert!(valid_name("os.path", true) && !valid_name("os.path", false));
        for bad in ["", "1x", "a-b", "a..b", ".a", "a.", "é", "a b"] {
            assert!(!valid_name(bad, true), "{bad:?}");
        }
    }
}
