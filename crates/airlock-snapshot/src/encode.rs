//! The body writer: payload bytes in, framed LZ4 blocks out, each hashed (SHA-256) and
//! written in order as it is produced.
//!
//! Blocks are compressed on worker threads (one per core, at most [`MAX_THREADS`]) while the
//! calling thread walks the tree, hashes and writes; block boundaries depend only on the
//! payload, so the body, and the id, are the same whatever the thread count.
//!
//! Measured on this project's 2-core VM (lz4_flex 0.14 safe encoder, 1 MiB blocks, SHA-NI):
//! one core compresses and hashes Python source at about 450-530 MB/s (ratio 2.6) and a
//! 133 MB pickle (dicts, strings, numpy arrays) at about 930-1050 MB/s (ratio 1.4); zstd
//! level 1 did 450 and 590-650 MB/s (ratios 3.9 and 2.3), so LZ4 was chosen. The whole
//! [`crate::Store::write`] (walk, compress on 2 workers, hash, write; `examples/throughput.rs`)
//! from a tmpfs data root into a tmpfs store: 620-700 MB/s on 296 MB of Python source (5632
//! files), 700-910 MB/s on a 133 MB pickle as kernel state, 820-920 MB/s on a mix of both;
//! into the ext4 store with its fsync, 530-620 MB/s on the mix. It is CPU-bound on the two
//! cores: LZ4 about half the cycles, SHA-256 a fifth, the kernel's copies a quarter.
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

use sha2::{Digest as _, Sha256};

use crate::error::{Result, SnapshotError};
use crate::format::{BlockHeader, BlockKind, BLOCK_HEADER_LEN, BLOCK_LEN};

/// Most compression threads a write uses.
pub(crate) const MAX_THREADS: usize = 4;

/// A framed block: `buf[..len]` is its header and stored bytes (`buf` is kept at full size so
/// it is reused without being cleared).
#[derive(Debug, Default)]
struct Framed {
    buf: Vec<u8>,
    len: usize,
}

/// Frames one block of payload: LZ4 when that is smaller, else the bytes as they are.
fn frame_block(raw: &[u8], out: &mut Framed) {
    let need = BLOCK_HEADER_LEN + lz4_flex::block::get_maximum_output_size(raw.len());
    if out.buf.len() < need {
        out.buf.resize(need, 0);
    }
    let body = &mut out.buf[BLOCK_HEADER_LEN..];
    let (kind, stored_len) = match lz4_flex::block::compress_into(raw, body) {
        Ok(n) if n < raw.len() => (BlockKind::Lz4, n),
        _ => {
            body[..raw.len()].copy_from_slice(raw);
            (BlockKind::Stored, raw.len())
        }
    };
    let header = BlockHeader {
        kind,
        raw_len: raw.len(),
        stored_len,
    };
    out.buf[..BLOCK_HEADER_LEN].copy_from_slice(&header.encode());
    out.len = BLOCK_HEADER_LEN + stored_len;
}

/// Where framed blocks go: the file, the running digest and the length.
#[derive(Debug)]
struct Sink<W> {
    out: W,
    hash: Sha256,
    len: u64,
}

impl<W: Write> Sink<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.hash.update(bytes);
        self.len += u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        Ok(())
    }
}

/// One block handed to a worker, and handed back framed.
#[derive(Debug)]
struct Job {
    seq: u64,
    raw: Vec<u8>,
    framed: Framed,
}

/// The worker threads' two queues.
#[derive(Debug)]
struct Workers {
    jobs: Sender<Job>,
    done: Receiver<Job>,
    in_flight: usize,
    max_in_flight: usize,
}

/// Turns payload bytes ([`Write`]) into the body. Made by [`encode`].
#[derive(Debug)]
pub(crate) struct Encoder<W> {
    raw: Vec<u8>,
    workers: Option<Workers>,
    spare_raw: Vec<Vec<u8>>,
    spare_framed: Vec<Framed>,
    pending: BTreeMap<u64, Job>,
    next_seq: u64,
    next_out: u64,
    sink: Sink<W>,
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let take = buf.len().min(BLOCK_LEN - self.raw.len());
        self.raw.extend_from_slice(&buf[..take]);
        if self.raw.len() == BLOCK_LEN {
            self.submit()?;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Encoder<W> {
    fn new(out: W, workers: Option<Workers>) -> Encoder<W> {
        Encoder {
            raw: Vec::with_capacity(BLOCK_LEN),
            workers,
            spare_raw: Vec::new(),
            spare_framed: Vec::new(),
            pending: BTreeMap::new(),
            next_seq: 0,
            next_out: 0,
            sink: Sink {
                out,
                hash: Sha256::new(),
                len: 0,
            },
        }
    }

    /// Hands the current block on (to a worker, or frames it here) and starts the next.
    fn submit(&mut self) -> io::Result<()> {
        let fresh = self
            .spare_raw
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BLOCK_LEN));
        let raw = std::mem::replace(&mut self.raw, fresh);
        let job = Job {
            seq: self.next_seq,
            raw,
            framed: self.spare_framed.pop().unwrap_or_default(),
        };
        self.next_seq += 1;
        let Some(w) = self.workers.as_mut() else {
            let mut job = job;
            frame_block(&job.raw, &mut job.framed);
            return self.emit(job);
        };
        if w.in_flight >= w.max_in_flight {
            let done = w.done.recv().map_err(|_| gone())?;
            w.in_flight -= 1;
            self.pending.insert(done.seq, done);
        }
        self.send_then_flush(job)
    }

    fn send_then_flush(&mut self, job: Job) -> io::Result<()> {
        if let Some(w) = self.workers.as_mut() {
            w.jobs.send(job).map_err(|_| gone())?;
            w.in_flight += 1;
            while let Ok(done) = w.done.try_recv() {
                w.in_flight -= 1;
                self.pending.insert(done.seq, done);
            }
        }
        self.flush_ready()
    }

    /// Writes every framed block that is next in order.
    fn flush_ready(&mut self) -> io::Result<()> {
        while let Some(job) = self.pending.remove(&self.next_out) {
            self.emit(job)?;
        }
        Ok(())
    }

    fn emit(&mut self, mut job: Job) -> io::Result<()> {
        self.sink.put(&job.framed.buf[..job.framed.len])?;
        self.next_out += 1;
        job.raw.clear();
        self.spare_raw.push(job.raw);
        self.spare_framed.push(job.framed);
        Ok(())
    }

    /// Writes the last block and the end block: the body's digest and length.
    fn finish(mut self) -> io::Result<([u8; 32], u64)> {
        if !self.raw.is_empty() {
            self.submit()?;
        }
        while let Some(w) = self.workers.as_mut() {
            if w.in_flight == 0 {
                break;
            }
            let done = w.done.recv().map_err(|_| gone())?;
            w.in_flight -= 1;
            self.pending.insert(done.seq, done);
            self.flush_ready()?;
        }
        let end = BlockHeader {
            kind: BlockKind::End,
            raw_len: 0,
            stored_len: 0,
        };
        self.sink.put(&end.encode())?;
        Ok((self.sink.hash.finalize().into(), self.sink.len))
    }
}

/// A failed write of the body.
pub(crate) fn write_err(e: io::Error) -> SnapshotError {
    SnapshotError::io("write the snapshot")(e)
}

fn gone() -> io::Error {
    io::Error::other("a compression worker stopped")
}

/// Frames blocks until the job queue closes.
fn worker(jobs: &Mutex<Receiver<Job>>, done: &Sender<Job>) {
    loop {
        let next = jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recv();
        let Ok(mut job) = next else { return };
        frame_block(&job.raw, &mut job.framed);
        if done.send(job).is_err() {
            return;
        }
    }
}

/// How many compression threads a write uses here.
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS))
}

/// Runs `f` with an [`Encoder`] writing the body to `out` (compressing on `threads` workers;
/// `<= 1`: on this thread), then finishes the body: `f`'s value, the body's SHA-256 and its
/// length. The workers are gone when this returns, whatever `f` did.
pub(crate) fn encode<W: Write, T>(
    out: W,
    threads: usize,
    f: impl FnOnce(&mut Encoder<W>) -> Result<T>,
) -> Result<(T, [u8; 32], u64)> {
    if threads <= 1 {
        let mut enc = Encoder::new(out, None);
        let value = f(&mut enc)?;
        let (digest, len) = enc.finish().map_err(write_err)?;
        return Ok((value, digest, len));
    }
    let (jobs, job_rx) = channel();
    let (done_tx, done) = channel();
    let job_rx = Mutex::new(job_rx);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (rx, tx) = (&job_rx, done_tx.clone());
            scope.spawn(move || worker(rx, &tx));
        }
        drop(done_tx);
        let workers = Workers {
            jobs,
            done,
            in_flight: 0,
            max_in_flight: threads * 2,
        };
        let mut enc = Encoder::new(out, Some(workers));
        let value = f(&mut enc)?;
        let (digest, len) = enc.finish().map_err(write_err)?;
        Ok((value, digest, len))
    })
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
