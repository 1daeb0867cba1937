//! What airlock adds to a root before it is published: the sandbox's own account in
//! `/etc/passwd` and `/etc/group` (uid and gid 1000, the identity every sandbox runs as, with
//! `/work` as its home) when the image has none, airlock's `/etc/hosts`, and a root directory
//! anyone may enter. Files are replaced by rename, never written through a link.
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

use airlock_jail::dirfd::{fstat, DirFd, FileKind};

use crate::error::{ImageError, Result};

/// The account line added to `/etc/passwd`.
const PASSWD_LINE: &str = "sandbox:x:1000:1000:sandbox:/work:/bin/sh\n";
/// The group line added to `/etc/group`.
const GROUP_LINE: &str = "sandbox:x:1000:\n";
/// The guest's `/etc/hosts` (its hostname is always `airlock`).
const HOSTS: &str = "127.0.0.1 localhost airlock\n::1 localhost ip6-localhost\n";
/// Largest passwd or group file read.
const MAX_ACCOUNTS_BYTES: u64 = 1 << 20;

/// Prepares the root at `root` for publication.
pub fn finalize(root: &DirFd) -> Result<()> {
    let etc = match root.open_dir_in_root("etc") {
        Ok(d) => d,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            root.mkdir_at("etc", 0o755)
                .map_err(ImageError::io("mkdir etc"))?;
            root.open_dir_at("etc")
                .map_err(ImageError::io("open etc"))?
        }
        Err(e) => return Err(ImageError::io("open etc")(e)),
    };
    ensure_line(&etc, "passwd", PASSWD_LINE)?;
    ensure_line(&etc, "group", GROUP_LINE)?;
    replace(&etc, "hosts", HOSTS.as_bytes())?;
    let top = std::fs::File::from(std::os::fd::OwnedFd::from(
        root.reopen().map_err(ImageError::io("open root"))?,
    ));
    top.set_permissions(std::fs::Permissions::from_mode(0o755))
        .map_err(ImageError::io("chmod root"))
}

/// Appends `line` to `etc/name` unless a line there already has its id (third field).
fn ensure_line(etc: &DirFd, name: &str, line: &str) -> Result<()> {
    let id = line.split(':').nth(2).unwrap_or_default();
    let old = read_regular(etc, name)?;
    let has = old.lines().any(|l| l.split(':').nth(2) == Some(id));
    if has {
        return Ok(());
    }
    let mut new = old;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(line);
    replace(etc, name, new.as_bytes())
}

/// The text of `etc/name` when it is a regular file (empty otherwise).
fn read_regular(etc: &DirFd, name: &str) -> Result<String> {
    let Ok(f) = etc.open_read_at(name) else {
        return Ok(String::new());
    };
    if !fstat(std::os::fd::AsFd::as_fd(&f)).is_ok_and(|m| m.kind == FileKind::Regular) {
        return Ok(String::new());
    }
    let mut bytes = Vec::new();
    f.take(MAX_ACCOUNTS_BYTES)
        .read_to_end(&mut bytes)
        .map_err(ImageError::io(format!("read etc/{name}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Replaces `etc/name` with `bytes` (mode 0644) by writing a new file and renaming it over.
fn replace(etc: &DirFd, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = format!(".{name}.airlock-new");
    let mut left = 1;
    let _ = etc.remove_tree_at(&tmp, &mut left);
    let mut f = etc
        .create_at(&tmp, 0o644)
        .map_err(ImageError::io(format!("create etc/{name}")))?;
    f.write_all(bytes)
        .and_then(|()| f.set_permissions(std::fs::Permissions::from_mode(0o644)))
        .map_err(ImageError::io(format!("write etc/{name}")))?;
    let mut budget = 1_000_000;
    if etc
        .stat_at(name)
        .is_ok_and(|m| m.kind == FileKind::Directory)
    {
        etc.remove_tree_at(name, &mut budget)
            .map_err(ImageError::io(format!("replace etc/{name}")))?;
    }
    etc.rename_at(OsStr::new(&tmp), OsStr::new(name), false)
        .map_err(ImageError::io(format!("replace etc/{name}")))
}
