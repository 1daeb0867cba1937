//! A tenants token file: many bearer tokens, each naming the tenant it acts for, stored only
//! as SHA-256 digests (`airlock token add|rm|ls` edit it; `serve` reloads it on SIGHUP).
//!
//! One line per token: `NAME sha256:HEX ADDED_UNIX`; `#` starts a comment line. A tenant may
//! hold several tokens (rotation: add the new one, move clients, remove the old one).
//!
//! Why SHA-256 and not a password hash: every token is 32 random bytes made here, so a
//! digest cannot be reversed by guessing; a slow hash (argon2) protects low-entropy passwords,
//! and here it would hand every unauthenticated peer a lever on the server's CPU (one
//! memory-hard hash per connection attempt). A presented token is hashed once and compared
//! with every entry in constant time.
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::tenancy::tenant::Tenant;

/// Largest token file read.
pub const MAX_FILE: u64 = 1 << 20;
/// Most tokens one file may hold.
pub const MAX_TOKENS: usize = 10_000;
/// Longest tenant name.
pub const MAX_NAME: usize = 64;
/// What every token made here starts with (so a leaked one is recognisable).
pub const PREFIX: &str = "airlock_";

/// One token of the file: whose, its digest, when it was added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The tenant it acts for.
    pub tenant: Tenant,
    /// SHA-256 of the token.
    pub digest: [u8; 32],
    /// When it was added (seconds since the epoch).
    pub added_unix: u64,
}

/// Why a token file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// Reading or writing it failed.
    #[error("token file {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The failure.
        error: std::io::Error,
    },
    /// A line is not `NAME sha256:HEX ADDED_UNIX` (the line's text is not repeated: it may
    /// be a secret pasted by mistake).
    #[error("token file {path}, line {line}: {why}")]
    Malformed {
        /// The file.
        path: String,
        /// Its 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// Over [`MAX_FILE`] bytes or [`MAX_TOKENS`] tokens.
    #[error("token file {0} is too large")]
    TooLarge(String),
    /// A tenant name that is not `[a-z0-9][a-z0-9_-]*` (at most 64), or is reserved.
    #[error("tenant name {0:?}: {1}")]
    BadName(String, &'static str),
}

/// Checks a tenant name: `[a-z0-9][a-z0-9_-]*`, at most [`MAX_NAME`] bytes, not the single
/// tenant's name (a single-token server's tenant is `default`; a tenants file names its own).
pub fn check_name(name: &str) -> Result<(), TokenFileError> {
    let bad = |why| {
        Err(TokenFileError::BadName(
            name.chars().take(80).collect(),
            why,
        ))
    };
    if name.is_empty() || name.len() > MAX_NAME {
        return bad("must be 1 to 64 characters");
    }
    let first_ok = name.as_bytes()[0].is_ascii_lowercase() || name.as_bytes()[0].is_ascii_digit();
    let rest_ok = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !first_ok || !rest_ok {
        return bad("only a-z, 0-9, '-' and '_', starting with a letter or digit");
    }
    if name == crate::tenancy::tenant::SINGLE {
        return bad("reserved for a single-token server's one tenant");
    }
    Ok(())
}

/// SHA-256 of a presented token.
#[must_use]
pub fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// The tenant whose token this is, comparing with every entry (no early exit).
#[must_use]
pub fn find(entries: &[Entry], token: &[u8]) -> Option<Tenant> {
    use subtle::ConstantTimeEq as _;
    let d = digest(token);
    let mut found = None;
    for e in entries {
        if bool::from(e.digest.ct_eq(&d)) && found.is_none() {
            found = Some(e.tenant.clone());
        }
    }
    found
}

/// Whether `token` has the shape [`generate`] makes: [`PREFIX`] and 43 base64url characters.
#[must_use]
pub fn is_minted(token: &[u8]) -> bool {
    token.len() == PREFIX.len() + 43
        && token.starts_with(PREFIX.as_bytes())
        && token[PREFIX.len()..]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Every token-shaped run of `text` ([`PREFIX`] and the 43 characters [`generate`] writes
/// after it), wherever it sits.
pub(crate) fn minted_in(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    const LEN: usize = PREFIX.len() + 43;
    text.windows(PREFIX.len())
        .enumerate()
        .filter(|(_, w)| *w == PREFIX.as_bytes())
        .filter_map(move |(i, _)| text.get(i..i + LEN))
}

/// Whether `text` looks like a tenants file (its first non-comment line has a digest field),
/// rather than a single-token file.
#[must_use]
pub fn is_tenants_file(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|f| f.starts_with("sha256:"))
        })
}

/// Parse a tenants file's text.
///
/// A digest listed twice is refused, whoever's the lines are: that token would act for
/// whichever tenant came first (a line copied and renamed by hand), so the file is not used.
pub fn parse(path: &str, text: &str) -> Result<Vec<Entry>, TokenFileError> {
    let mut out: Vec<Entry> = Vec::new();
    let mut seen: std::collections::HashMap<[u8; 32], usize> = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| TokenFileError::Malformed {
            path: path.into(),
            line: i + 1,
            why: why.into(),
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, hash, added] = fields[..] else {
            return Err(bad("expected `NAME sha256:HEX ADDED_UNIX`"));
        };
        check_name(name).map_err(|e| bad(&e.to_string()))?;
        let digest = hash
            .strip_prefix("sha256:")
            .and_then(hex32)
            .ok_or_else(|| bad("the digest is not sha256: and 64 hex digits"))?;
        let added_unix = added
            .parse()
            .map_err(|_| bad("the time added is not a whole number"))?;
        if let Some(first) = seen.insert(digest, i + 1) {
            return Err(bad(&format!(
                "this token's digest is listed twice (also on line {first})"
            )));
        }
        if out.len() >= MAX_TOKENS {
            return Err(TokenFileError::TooLarge(path.into()));
        }
        out.push(Entry {
            tenant: Tenant::new(name),
            digest,
            added_unix,
        });
    }
    Ok(out)
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The file's text for `entries`.
#[must_use]
pub fn render(entries: &[Entry]) -> String {
    let mut s = String::from(
        "# airlock tenants: NAME sha256:DIGEST ADDED_UNIX (edit with `airlock token add|rm|ls`)\n",
    );
    for e in entries {
        let hex: String = e.digest.iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&format!("{} sha256:{hex} {}\n", e.tenant, e.added_unix));
    }
    s
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TokenFileError + '_ {
    move |error| TokenFileError::Io {
        path: path.display().to_string(),
        error,
    }
}

/// Read a token file's text (bounded). A link is followed: the operator names the path, and a
/// Kubernetes Secret's file is a link into its `..data` directory.
pub fn read_text(path: &Path) -> Result<String, TokenFileError> {
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(io(path))?
        .take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(io(path))?;
    if text.len() as u64 > MAX_FILE {
        return Err(TokenFileError::TooLarge(path.display().to_string()));
    }
    Ok(text)
}

/// The entries of the tenants file at `path`; none when it does not exist yet.
pub fn load(path: &Path) -> Result<Vec<Entry>, TokenFileError> {
    match read_text(path) {
        Ok(text) => parse(&path.display().to_string(), &text),
        Err(TokenFileError::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    }
}

/// Replace the file at `path` with `entries`: mode 0600, its owner kept, written aside,
/// fsync'd, renamed.
pub fn store(path: &Path, entries: &[Entry]) -> Result<(), TokenFileError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io(&tmp))?;
    // An edit keeps the file's owner (root editing the file of a server running as another
    // user must not lock that server out of it).
    let owner = std::fs::symlink_metadata(path).ok();
    let kept = owner.map_or(Ok(()), |m| {
        use std::os::unix::fs::MetadataExt;
        std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()))
    });
    let written = kept
        .and_then(|()| f.write_all(render(entries).as_bytes()))
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(path)(e));
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// A new token: [`PREFIX`] and 32 random bytes, base64url.
pub fn generate() -> Result<String, TokenFileError> {
    use base64::Engine;
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| io(Path::new("getrandom"))(std::io::Error::from(e)))?;
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    Ok(format!("{PREFIX}{body}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, token: &str) -> Entry {
        Entry {
            tenant: Tenant::new(name),
            digest: digest(token.as_bytes()),
            added_unix: 1,
        }
    }

    #[test]
    fn a_rendered_file_parses_back_and_finds_each_tenant_by_its_token() {
        let entries = vec![
            entry("alice", "tok-a-0123456789"),
            entry("bob", "tok-b-0123456789"),
        ];
        let text = render(&entries);
        assert!(is_tenants_file(&text));
        let back = parse("f", &text).unwrap();
        assert_eq!(back, entries);
        assert_eq!(find(&back, b"tok-b-0123456789"), Some(Tenant::new("bob")));
        assert_eq!(find(&back, b"tok-b-012345678"), None);
        assert!(!text.contains("tok-a"), "no secret is stored");
    }

    #[test]
    fn a_single_token_file_is_not_a_tenants_file() {
        assert!(!is_tenants_file("0123456789abcdef0123\n"));
        assert!(!is_tenants_file("# only a comment\n"));
    }

    #[test]
    fn a_malformed_line_is_named_without_its_text() {
        let e = parse("f", "alice sha256:00 1\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && !e.contains("sha256:00"), "{e}");
        let e = parse("f", "alice secret-token-pasted\n")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("secret-token-pasted"), "{e}");
    }

    #[test]
    fn a_digest_listed_twice_is_refused_without_its_text() {
        let alice = entry("alice", "tok-a-0123456789");
        let bob = Entry {
            tenant: Tenant::new("bob"),
            ..alice.clone()
        };
        let text = render(&[alice.clone(), bob]);
        let e = parse("f", &text).unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("twice") && e.contains("line 2"),
            "{e}"
        );
        let hex: String = alice.digest.iter().map(|b| format!("{b:02x}")).collect();
        assert!(!e.contains(&hex), "{e}");
        let again = render(&[alice.clone(), alice]);
        assert!(parse("f", &again).is_err(), "the same tenant's line twice");
    }

    #[test]
    fn tenant_names_are_checked() {
        for good in ["alice", "team-7", "a_b", "0x"] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            "Alice",
            "-a",
            "a b",
            "a/b",
            "a:b",
            "default",
            &"a".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_file_behind_a_link_is_read_as_a_kubernetes_secret_mounts_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        let text = render(&[entry("alice", "tok-a-0123456789")]);
        std::fs::write(dir.path().join("..data/token"), &text).unwrap();
        std::os::unix::fs::symlink("..data/token", dir.path().join("token")).unwrap();
        assert_eq!(read_text(&dir.path().join("token")).unwrap(), text);
    }

    #[test]
    fn generated_tokens_are_distinct_and_long() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 43);
    }
}
