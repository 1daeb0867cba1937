//! Which pages of a stopped kernel its image carries, read from its `/proc/PID/pagemap`
//! (bounded: a chunk of entries at a time, however large the mapping).
//!
//! An image carries what the kernel's own memory holds and nothing it does not: an anonymous
//! page never touched, or only read (the kernel's shared zero page, which its RSS does not
//! count), carries no bytes, so a restored kernel holds no more memory than the paused one
//! did; a private file mapping whose pages are all still the file's is mapped from the file
//! again (the facts checked that file), not copied into anonymous memory.
use airlock_executor::kernel_image::{Kind, Region, MAX_REGIONS};

/// Why a kernel's pages could not be told.
#[derive(Debug, thiserror::Error)]
pub(super) enum PagesError {
    /// Its memory splits into more regions than an image may have.
    #[error("it has too many mappings")]
    TooMany,
    /// It holds memory of its own it made unreadable.
    #[error("it holds memory it made unreadable (PROT_NONE), which an image cannot read back")]
    Hidden,
    /// Its pagemap or memory could not be read.
    #[error("{0}")]
    Unreadable(String),
}

const PAGE: u64 = 4096;
const PAGE_LEN: usize = 4096;
const PROT_READ: u32 = 1;
/// Pagemap entries read at once (512 KiB).
const CHUNK_PAGES: u64 = 64 << 10;
/// `/proc/PID/pagemap` bits (Documentation/admin-guide/mm/pagemap.rst).
const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
const FILE_OR_SHARED: u64 = 1 << 61;
const EXCLUSIVE: u64 = 1 << 56;

/// What one page holds, for an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    /// Nothing of its own: never touched, or still the file's page.
    Nothing,
    /// Memory of its own (possibly swapped out).
    Own,
    /// Present but not the process's alone: the zero page, or a page shared with the process
    /// it was forked from; its bytes decide.
    Shared,
}

fn page(entry: u64) -> Page {
    if entry & SWAPPED != 0 {
        Page::Own
    } else if entry & PRESENT == 0 || entry & FILE_OR_SHARED != 0 {
        Page::Nothing
    } else if entry & EXCLUSIVE != 0 {
        Page::Own
    } else {
        Page::Shared
    }
}

/// The pages a region carries: an anonymous one is split where they start and stop; a private
/// file mapping is carried whole if any page of it is the process's own, else not at all.
/// Memory of its own the process made unreadable (`PROT_NONE`) cannot be read back into an
/// image: [`PagesError::Hidden`], never a restore without it.
pub(super) fn carried(pid: i32, r: Region) -> Result<Vec<Region>, PagesError> {
    let private = match &r.kind {
        Kind::Anon => true,
        Kind::File { shared, .. } => !shared,
        _ => false,
    };
    if !private {
        return Ok(vec![r]);
    }
    if r.prot & PROT_READ == 0 {
        return match any_own(pid, &r)? {
            true => Err(PagesError::Hidden),
            false => Ok(vec![Region { fill: false, ..r }]),
        };
    }
    match r.kind {
        Kind::Anon => split(pid, r),
        _ => {
            let fill = any_own(pid, &r)?;
            Ok(vec![Region { fill, ..r }])
        }
    }
}

/// Split an anonymous region into runs of carried and uncarried pages: a page shared with
/// another process is carried unless it holds only zeros (as the zero page does).
fn split(pid: i32, r: Region) -> Result<Vec<Region>, PagesError> {
    let mut out: Vec<Region> = Vec::new();
    walk(pid, &r, |at, page| {
        let fill = match page {
            Page::Nothing => false,
            Page::Own => true,
            Page::Shared => !zero(pid, at)?,
        };
        match out.last_mut().filter(|l| l.fill == fill && l.end == at) {
            Some(l) => l.end = at + PAGE,
            None => {
                if out.len() >= MAX_REGIONS {
                    return Err(PagesError::TooMany);
                }
                out.push(Region {
                    start: at,
                    end: at + PAGE,
                    fill,
                    ..r.clone()
                });
            }
        }
        Ok(true)
    })?;
    Ok(out)
}

/// Whether any page of `r` is not the file's or never touched (stops at the first).
fn any_own(pid: i32, r: &Region) -> Result<bool, PagesError> {
    let mut own = false;
    walk(pid, r, |_, page| {
        own = page != Page::Nothing;
        Ok(!own)
    })?;
    Ok(own)
}

/// Call `each(address, page)` for every page of `r` in order while it returns true.
fn walk(
    pid: i32,
    r: &Region,
    mut each: impl FnMut(u64, Page) -> Result<bool, PagesError>,
) -> Result<(), PagesError> {
    use std::os::unix::fs::FileExt;
    let broken = |e: std::io::Error| PagesError::Unreadable(format!("pagemap: {e}"));
    let map = std::fs::File::open(format!("/proc/{pid}/pagemap")).map_err(broken)?;
    let mut raw = Vec::new();
    let mut at = r.start;
    while at < r.end {
        let pages = ((r.end - at) / PAGE).min(CHUNK_PAGES);
        raw.resize(usize::try_from(pages * 8).unwrap_or(0), 0);
        map.read_exact_at(&mut raw, at / PAGE * 8).map_err(broken)?;
        for e in raw.chunks_exact(8) {
            let entry = u64::from_le_bytes(e.try_into().unwrap_or_default());
            if !each(at, page(entry))? {
                return Ok(());
            }
            at += PAGE;
        }
    }
    Ok(())
}

/// Whether the stopped kernel's page at `at` holds only zeros.
fn zero(pid: i32, at: u64) -> Result<bool, PagesError> {
    let mut buf = [0u8; PAGE_LEN];
    let n = airlock_jail::image::read_memory(pid, at, &mut buf)
        .map_err(|e| PagesError::Unreadable(format!("its memory could not be read: {e}")))?;
    Ok(n == buf.len() && buf.iter().all(|&b| b == 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_told_apart_by_their_pagemap_bits() {
        assert_eq!(page(0), Page::Nothing);
        assert_eq!(page(SWAPPED), Page::Own);
        assert_eq!(page(PRESENT | EXCLUSIVE), Page::Own);
        assert_eq!(page(PRESENT | FILE_OR_SHARED), Page::Nothing);
        assert_eq!(page(PRESENT | FILE_OR_SHARED | EXCLUSIVE), Page::Nothing);
        assert_eq!(page(PRESENT), Page::Shared);
    }
}
