//! Opening a snapshot for reading: the file must be the store's own, and its MAC and digest
//! must hold over the whole body, before a byte of the body is parsed.
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use airlock_jail::dirfd::{self, DirFd, FileKind, Meta};
use airlock_jail::identity::effective_uid;
use sha2::{Digest as _, Sha256};

use crate::error::{Result, SnapshotError};
use crate::format::{Header, HEADER_LEN};
use crate::id::SnapshotId;
use crate::mac::{ct_eq, Key};

/// A snapshot file whose body hashes to its id under a MAC made with this store's key.
#[derive(Debug)]
pub(crate) struct Verified {
    pub(crate) file: File,
    pub(crate) meta: Meta,
    pub(crate) body_len: u64,
}

/// Opens and verifies the snapshot `id` in `dir`.
pub(crate) fn open_verified(dir: &DirFd, id: &SnapshotId, key: &Key) -> Result<Verified> {
    let file = match dir.open_read_at(id.as_str()) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            return Err(SnapshotError::NotFound(id.clone()));
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(foreign(id, "it is a symbolic link"));
        }
        Err(e) => return Err(SnapshotError::io(format!("open snapshot {id}"))(e)),
    };
    let meta = dirfd::fstat(file.as_fd()).map_err(SnapshotError::io("stat a snapshot"))?;
    check_ours(id, &meta)?;
    let header = read_header(&file, id, meta.size)?;
    let want = (HEADER_LEN as u64).saturating_add(header.body_len);
    if meta.size < want {
        return Err(truncated(id, meta.size, want));
    }
    if meta.size > want {
        let why = format!("{} bytes after its body", meta.size - want);
        return Err(SnapshotError::Tampered {
            id: id.clone(),
            why,
        });
    }
    let digest = hash_body(&file, id, header.body_len)?;
    let actual = SnapshotId::from_digest(&digest);
    if actual != *id {
        let why = format!("its body hashes to {actual}");
        return Err(SnapshotError::Tampered {
            id: id.clone(),
            why,
        });
    }
    if !ct_eq(&key.mac(&digest), &header.mac) {
        return Err(foreign(id, "its MAC was made with another key"));
    }
    Ok(Verified {
        file,
        meta,
        body_len: header.body_len,
    })
}

fn foreign(id: &SnapshotId, why: impl Into<String>) -> SnapshotError {
    SnapshotError::Foreign {
        id: id.clone(),
        why: why.into(),
    }
}

fn truncated(id: &SnapshotId, have: u64, want: u64) -> SnapshotError {
    SnapshotError::Truncated {
        id: id.clone(),
        have,
        want,
    }
}

/// A regular file, owned by the caller, mode exactly 0600: what this store writes.
fn check_ours(id: &SnapshotId, meta: &Meta) -> Result<()> {
    if meta.kind != FileKind::Regular {
        return Err(foreign(id, format!("it is a {:?}, not a file", meta.kind)));
    }
    if meta.uid != effective_uid() {
        return Err(foreign(id, format!("it is owned by uid {}", meta.uid)));
    }
    if meta.mode != 0o600 {
        return Err(foreign(
            id,
            format!("its mode is {:04o}, not 0600", meta.mode),
        ));
    }
    Ok(())
}

fn read_header(file: &File, id: &SnapshotId, size: u64) -> Result<Header> {
    if size < HEADER_LEN as u64 {
        return Err(truncated(id, size, HEADER_LEN as u64));
    }
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(&mut h, 0)
        .map_err(SnapshotError::io(format!("read snapshot {id}")))?;
    Header::decode(&h)
}

/// The SHA-256 of the `len` body bytes after the header.
fn hash_body(file: &File, id: &SnapshotId, len: u64) -> Result<[u8; 32]> {
    let mut buf = vec![0u8; 1 << 20];
    let mut hash = Sha256::new();
    let mut pos = HEADER_LEN as u64;
    let end = pos + len;
    while pos < end {
        let want = usize::try_from(end - pos).map_or(buf.len(), |l| l.min(buf.len()));
        let n = file
            .read_at(&mut buf[..want], pos)
            .map_err(SnapshotError::io(format!("read snapshot {id}")))?;
        if n == 0 {
            return Err(truncated(id, pos, end));
        }
        hash.update(&buf[..n]);
        pos += n as u64;
    }
    Ok(hash.finalize().into())
}
