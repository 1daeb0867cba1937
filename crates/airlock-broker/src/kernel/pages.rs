//! Which pages of a stopped kernel its image carries, read from its `/proc/PID/pagemap`
//! (bounded: a chunk of entries at a time, however large the mapping).
//!
//! An image carries what the kernel's own memory holds and nothing it does not: a page of
//! its own memory (anonymous, its stack, or a private file page it wrote) carries its bytes;
//! a page never touched, only read (the shared zero page, which its RSS does not count) or
//! still the file's carries none, so a restored kernel holds no more memory than the paused
//! one did. Each region is split into runs of pages that carry bytes and pages that do not
//! (a file mapping's runs keep their offsets into the file, which the facts checked).
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
    /// It has guard regions (`MADV_GUARD_INSTALL`), which an image does not carry.
    #[error("it has guard regions (MADV_GUARD_INSTALL), which an image does not carry")]
    Guarded,
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
const GUARD: u64 = 1 << 58;
const EXCLUSIVE: u64 = 1 << 56;
/// The most shared pages read at once to see whether they hold only zeros (1 MiB).
const RUN_PAGES: usize = 256;

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
    /// A guard marker.
    Guard,
}

fn page(entry: u64) -> Page {
    if entry & GUARD != 0 {
        Page::Guard
    } else if entry & SWAPPED != 0 {
        Page::Own
    } else if entry & PRESENT == 0 || entry & FILE_OR_SHARED != 0 {
        Page::Nothing
    } else if entry & EXCLUSIVE != 0 {
        Page::Own
    } else {
        Page::Shared
    }
}

/// A stopped kernel's pages: its pid and its `/proc/PID/pagemap`, opened once for all its
/// mappings.
pub(super) struct Pages {
    pid: i32,
    map: std::fs::File,
}

impl Pages {
    /// Open the pagemap of `pid`.
    pub(super) fn open(pid: i32) -> Result<Pages, PagesError> {
        let map = std::fs::File::open(format!("/proc/{pid}/pagemap"))
            .map_err(|e| PagesError::Unreadable(format!("pagemap: {e}")))?;
        Ok(Pages { pid, map })
    }

    /// The pages a region carries, as runs (in address order). Memory of its own the process
    /// made unreadable (`PROT_NONE`) cannot be read back into an image: [`PagesError::Hidden`],
    /// never a restore without it.
    pub(super) fn carried(&self, r: Region) -> Result<Vec<Region>, PagesError> {
        let private = match &r.kind {
            Kind::Anon | Kind::Stack => true,
            Kind::File { shared, .. } => !shared,
            Kind::Special { .. } => false,
        };
        if !private {
            return Ok(vec![r]);
        }
        let readable = r.prot & PROT_READ != 0;
        // A file page of its own is carried whatever it holds (zeros are not the file's bytes).
        let zeros_dropped = readable && !matches!(r.kind, Kind::File { .. });
        let mut runs = Runs {
            region: &r,
            out: Vec::new(),
        };
        let mut buf = Vec::new();
        walk(&self.map, &r, |at, pages| {
            if pages.contains(&Page::Guard) {
                return Err(PagesError::Guarded);
            }
            let mut fill: Vec<bool> = pages.iter().map(|p| *p != Page::Nothing).collect();
            if !readable && fill.contains(&true) {
                return Err(PagesError::Hidden);
            }
            if zeros_dropped {
                drop_zero_pages(self.pid, at, pages, &mut fill, &mut buf);
            }
            for (i, fill) in fill.into_iter().enumerate() {
                runs.push(at + i as u64 * PAGE, fill)?;
            }
            Ok(())
        })?;
        Ok(runs.out)
    }
}

/// Regions cut from one mapping.
struct Runs<'a> {
    region: &'a Region,
    out: Vec<Region>,
}

impl Runs<'_> {
    /// The page at `at` next, carrying bytes or not.
    fn push(&mut self, at: u64, fill: bool) -> Result<(), PagesError> {
        if let Some(last) = self
            .out
            .last_mut()
            .filter(|l| l.fill == fill && l.end == at)
        {
            last.end = at + PAGE;
            return Ok(());
        }
        if self.out.len() >= MAX_REGIONS {
            return Err(PagesError::TooMany);
        }
        let r = self.region;
        // A file mapping's run starts that much further into the file.
        let mut kind = r.kind.clone();
        if let Kind::File { offset, .. } = &mut kind {
            *offset += at - r.start;
        }
        self.out.push(Region {
            start: at,
            end: at + PAGE,
            prot: r.prot,
            kind,
            fill,
        });
        Ok(())
    }
}

/// Clear `fill` for each shared page (from `at`) that holds only zeros, reading runs of them
/// at once. A page that cannot be read is left carried (its reading then fails the image).
fn drop_zero_pages(pid: i32, at: u64, pages: &[Page], fill: &mut [bool], buf: &mut Vec<u8>) {
    let mut i = 0;
    while i < pages.len() {
        if pages[i] != Page::Shared {
            i += 1;
            continue;
        }
        let run = pages[i..]
            .iter()
            .take(RUN_PAGES)
            .take_while(|p| **p == Page::Shared)
            .count();
        buf.resize(run * PAGE_LEN, 0);
        let got = airlock_jail::image::read_memory(pid, at + i as u64 * PAGE, buf).unwrap_or(0);
        for (k, bytes) in buf[..got.min(buf.len())].chunks_exact(PAGE_LEN).enumerate() {
            if bytes.iter().all(|&b| b == 0) {
                fill[i + k] = false;
            }
        }
        i += run;
    }
}

/// Call `each(address, pages)` for each chunk of `r`'s pages, in order.
fn walk(
    map: &std::fs::File,
    r: &Region,
    mut each: impl FnMut(u64, &[Page]) -> Result<(), PagesError>,
) -> Result<(), PagesError> {
    use std::os::unix::fs::FileExt;
    let broken = |e: std::io::Error| PagesError::Unreadable(format!("pagemap: {e}"));
    let mut raw = Vec::new();
    let mut pages = Vec::new();
    let mut at = r.start;
    while at < r.end {
        let n = ((r.end - at) / PAGE).min(CHUNK_PAGES);
        raw.resize(usize::try_from(n * 8).unwrap_or(0), 0);
        map.read_exact_at(&mut raw, at / PAGE * 8).map_err(broken)?;
        pages.clear();
        pages.extend(
            raw.chunks_exact(8)
                .map(|e| page(u64::from_le_bytes(e.try_into().unwrap_or_default()))),
        );
        each(at, &pages)?;
        at += n * PAGE;
    }
    Ok(())
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
        assert_eq!(page(GUARD), Page::Guard);
        assert_eq!(page(GUARD | SWAPPED), Page::Guard);
    }
}
