//! A [`Read`] over a byte range of a file by position (`pread`), so several readers of one
//! open snapshot never share a cursor.
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Reads `file` from `pos` up to `end`.
#[derive(Debug)]
pub(crate) struct At {
    file: Arc<File>,
    pos: u64,
    end: u64,
}

impl At {
    /// The bytes `[pos, end)` of `file`.
    pub(crate) fn new(file: Arc<File>, pos: u64, end: u64) -> At {
        At { file, pos, end }
    }
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_sub(self.pos);
        let want = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
