//! A background process's output: the recent bytes kept for whoever asks later (a client that
//! re-attaches), and every chunk offered to whoever listens now. A listener that does not keep
//! up loses chunks (counted), never slows the process.
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use tokio::sync::broadcast;

/// Bytes of recent output kept per process.
pub const KEPT_BYTES: usize = 256 * 1024;
/// Events queued per listener before it starts losing them.
const LISTENER_QUEUE: usize = 256;

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessStream {
    /// stdout.
    Stdout,
    /// stderr.
    Stderr,
    /// A terminal (stdout and stderr are one).
    Pty,
}

impl ProcessStream {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::Pty => "pty",
        }
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

/// What a listener hears.
#[derive(Debug, Clone)]
pub enum ProcessEvent {
    /// Bytes the process wrote.
    Output {
        /// Which stream.
        stream: ProcessStream,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The process ended (the last event).
    Exited(Exit),
}

/// The recent output of one process.
#[derive(Debug, Default)]
struct Kept {
    chunks: VecDeque<(ProcessStream, Vec<u8>)>,
    bytes: usize,
    /// Bytes that fell out of the window.
    dropped: u64,
}

/// A process's output log.
#[derive(Debug)]
pub struct OutputLog {
    kept: Mutex<Kept>,
    events: broadcast::Sender<ProcessEvent>,
    /// A listener made with the log, so the connection that starts the process hears its
    /// first output too (a listener made after the start would miss what came before it).
    first: Mutex<Option<broadcast::Receiver<ProcessEvent>>>,
}

impl Default for OutputLog {
    fn default() -> Self {
        let (events, first) = broadcast::channel(LISTENER_QUEUE);
        Self {
            kept: Mutex::default(),
            events,
            first: Mutex::new(Some(first)),
        }
    }
}

/// The recent output, per stream, as [`OutputLog::recent`] returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recent {
    /// stdout (or the terminal's output).
    pub stdout: Vec<u8>,
    /// stderr.
    pub stderr: Vec<u8>,
    /// Bytes older than the window, no longer kept.
    pub dropped: u64,
}

impl OutputLog {
    /// Keep `data` and offer it to the listeners.
    pub fn push(&self, stream: ProcessStream, data: Vec<u8>) {
        if data.is_empty() {
            return;
        }
        {
            let mut k = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            k.bytes += data.len();
            k.chunks.push_back((stream, data.clone()));
            while k.bytes > KEPT_BYTES {
                let Some((_, old)) = k.chunks.pop_front() else {
                    break;
                };
                k.bytes -= old.len();
                k.dropped += old.len() as u64;
            }
        }
        let _ = self.events.send(ProcessEvent::Output { stream, data });
    }

    /// Tell the listeners the process ended.
    pub fn exited(&self, exit: Exit) {
        let _ = self.events.send(ProcessEvent::Exited(exit));
    }

    /// A new listener (hears what comes from now on).
    #[must_use]
    pub fn listen(&self) -> broadcast::Receiver<ProcessEvent> {
        self.events.subscribe()
    }

    /// The listener made with the log, which has heard every event since (at most
    /// `LISTENER_QUEUE` of them queued); once taken, a new listener as [`Self::listen`] makes.
    #[must_use]
    pub fn listen_from_start(&self) -> broadcast::Receiver<ProcessEvent> {
        self.first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| self.events.subscribe())
    }

    /// The output kept (at most [`KEPT_BYTES`], the newest).
    #[must_use]
    pub fn recent(&self) -> Recent {
        let k = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut r = Recent {
            dropped: k.dropped,
            ..Recent::default()
        };
        for (stream, data) in &k.chunks {
            match stream {
                ProcessStream::Stderr => r.stderr.extend_from_slice(data),
                _ => r.stdout.extend_from_slice(data),
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_keeps_the_newest_bytes_and_counts_the_rest() {
        let log = OutputLog::default();
        for i in 0..100u8 {
            log.push(ProcessStream::Stdout, vec![i; 4096]);
        }
        log.push(ProcessStream::Stderr, b"err".to_vec());
        let r = log.recent();
        assert!(r.stdout.len() + r.stderr.len() <= KEPT_BYTES);
        assert_eq!(r.stderr, b"err");
        assert_eq!(*r.stdout.last().unwrap(), 99);
        assert_eq!(r.dropped + (r.stdout.len() + 3) as u64, 100 * 4096 + 3);
    }

    #[test]
    fn the_first_listener_hears_what_came_before_it_was_taken() {
        let log = OutputLog::default();
        log.push(ProcessStream::Stdout, b"early".to_vec());
        log.exited(Exit {
            exit_code: Some(0),
            signal: None,
        });
        let mut rx = log.listen_from_start();
        assert!(matches!(rx.try_recv(), Ok(ProcessEvent::Output { data, .. }) if data == b"early"));
        assert!(matches!(rx.try_recv(), Ok(ProcessEvent::Exited(_))));
        // Taken once: the next listener hears only what comes next.
        assert!(log.listen_from_start().try_recv().is_err());
    }

    #[test]
    fn a_listener_hears_output_then_the_exit() {
        let log = OutputLog::default();
        let mut rx = log.listen();
        log.push(ProcessStream::Pty, b"hi".to_vec());
        log.exited(Exit {
            exit_code: Some(0),
            signal: None,
        });
        assert!(matches!(rx.try_recv(), Ok(ProcessEvent::Output { data, .. }) if data == b"hi"));
        assert!(matches!(rx.try_recv(), Ok(ProcessEvent::Exited(e)) if e.exit_code == Some(0)));
    }
}
