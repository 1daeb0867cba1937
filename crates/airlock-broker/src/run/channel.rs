//! The broker's end of the executor socket, read and written by the supervising task itself.
//!
//! A tool call is one frame in and one frame out. Relaying each through a reader task and a
//! writer task cost two task hops, and when the supervisor ran on another thread than the I/O
//! tasks (a `block_on` caller, a busy worker), two cross-thread wake-ups per call: ~70 µs of
//! broker CPU per call in `perf`, mostly `futex` wakes (docs/performance.md). Now the
//! supervisor reads frames itself ([`Inbox::recv`], cancel-safe, for its `select!` loops) and
//! writes with a non-blocking `try_write` ([`Outbox::try_send`]); only bytes the socket does not
//! take at once go to a flusher task. The bounds are the ones the channels had: at most
//! [`OUTBOX`] frames queued towards a guest that does not read, after which `try_send` fails.
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use airlock_protocol::{encode_message, AsyncFrameReader, FrameError, FrameLimits, Message};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Frames queued towards the executor; the protocol keeps at most a couple outstanding, so a
/// full queue means the guest floods requests without reading answers.
pub(crate) const OUTBOX: usize = 16;

/// What the executor sent: a message, `Ok(None)` once at a clean EOF, an error once; then
/// `None` for ever.
pub(crate) type Received = Option<Result<Option<Message>, FrameError>>;

/// The reading end: frames are read when (and only when) the supervisor asks.
pub(crate) struct Inbox {
    frames: AsyncFrameReader<OwnedReadHalf>,
    ended: bool,
}

impl Inbox {
    /// The next message. Cancel-safe: a dropped call loses nothing (the frame reader keeps
    /// partial frames in its own buffer).
    pub(crate) async fn recv(&mut self) -> Received {
        if self.ended {
            return None;
        }
        let msg = self.frames.read_message().await;
        // A clean EOF, a broken frame or an undecodable body ends the stream, as before.
        self.ended = !matches!(msg, Ok(Some(_)));
        Some(msg)
    }
}

/// The socket refused the message (closed, broken, or [`OUTBOX`] frames already waiting).
#[derive(Debug)]
pub(crate) struct NotSent;

struct Queue {
    frames: VecDeque<Vec<u8>>,
    /// Bytes of the front frame already written.
    written: usize,
    closed: bool,
}

struct Shared {
    sock: OwnedWriteHalf,
    queue: Mutex<Queue>,
    more: Notify,
    /// A queued frame was written: room for [`Outbox::send`].
    room: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writing end (cheap to clone).
#[derive(Clone)]
pub(crate) struct Outbox {
    shared: Arc<Shared>,
}

impl Outbox {
    /// Queue `msg` without waiting: written at once when the socket takes it, else by the
    /// flusher task, in order.
    pub(crate) fn try_send(&self, msg: Message) -> Result<(), NotSent> {
        let frame = encode_message(&msg, &FrameLimits::default());
        let mut q = self.shared.lock();
        let Ok(frame) = frame else {
            // An over-cap frame cannot be written; the old writer stopped here too.
            q.closed = true;
            return Err(NotSent);
        };
        if q.closed || q.frames.len() >= OUTBOX {
            return Err(NotSent);
        }
        let mut written = 0;
        if q.frames.is_empty() {
            match self.shared.sock.try_write(&frame) {
                Ok(n) if n == frame.len() => return Ok(()),
                Ok(n) => written = n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => {
                    q.closed = true;
                    return Err(NotSent);
                }
            }
            q.written = written;
        }
        q.frames.push_back(frame);
        drop(q);
        self.shared.more.notify_one();
        Ok(())
    }
}

impl Outbox {
    /// Queue `msg`, first waiting while [`OUTBOX`] frames wait (a bulk transfer, such as a
    /// kernel's state, paced by the guest's reading); Err once the socket is gone.
    pub(crate) async fn send(&self, msg: Message) -> Result<(), NotSent> {
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let q = self.shared.lock();
                if q.closed {
                    return Err(NotSent);
                }
                if q.frames.len() < OUTBOX {
                    break;
                }
            }
            room.await;
        }
        self.try_send(msg)
    }
}

/// Split the broker's end of the socket; the task flushes what [`Outbox::try_send`] queued
/// (abort it with the run; the socket's write side shuts when the last `Outbox` is dropped).
pub(crate) fn open(sock: UnixStream) -> (Inbox, Outbox, JoinHandle<()>) {
    let (read, write) = sock.into_split();
    let shared = Arc::new(Shared {
        sock: write,
        queue: Mutex::new(Queue {
            frames: VecDeque::new(),
            written: 0,
            closed: false,
        }),
        more: Notify::new(),
        room: Notify::new(),
    });
    let flusher = tokio::spawn(flush(Arc::clone(&shared)));
    let inbox = Inbox {
        frames: AsyncFrameReader::new(read),
        ended: false,
    };
    (inbox, Outbox { shared }, flusher)
}

/// Write queued frames as the socket takes them.
async fn flush(shared: Arc<Shared>) {
    loop {
        shared.more.notified().await;
        loop {
            let blocked = {
                let mut q = shared.lock();
                let Some(front) = q.frames.front() else { break };
                let len = front.len();
                match shared.sock.try_write(&front[q.written..]) {
                    Ok(n) if n > 0 => {
                        q.written += n;
                        if q.written == len {
                            q.frames.pop_front();
                            q.written = 0;
                            shared.room.notify_waiters();
                        }
                        false
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => true,
                    _ => {
                        q.closed = true;
                        q.frames.clear();
                        shared.room.notify_waiters();
                        return;
                    }
                }
            };
            if blocked && shared.sock.writable().await.is_err() {
                shared.lock().closed = true;
                shared.room.notify_waiters();
                return;
            }
        }
    }
}
