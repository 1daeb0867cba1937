//! A background process's stdio on the broker's side: a pipe or a terminal's master for its
//! stdin, and readers that move its output into its [`OutputLog`](super::output_log::OutputLog).
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use airlock_executor::config::ProcessStdio;
use airlock_jail::pty;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::process::{ChildStderr, ChildStdout};
use tokio::task::JoinHandle;

use super::output_log::{OutputLog, ProcessStream};

/// Bytes read from the output in one go.
const CHUNK: usize = 16 * 1024;

/// Where the client's input goes.
#[derive(Debug)]
pub(super) enum Stdin {
    /// The write end of the process's stdin pipe.
    Pipe(tokio::net::unix::pipe::Sender),
    /// The terminal's master.
    Terminal(Arc<AsyncFd<File>>),
}

impl Stdin {
    /// Write all of `data`, waiting at most `timeout` for the process to make room.
    pub(super) async fn write(&mut self, data: &[u8], timeout: Duration) -> Result<(), String> {
        let full = || "the process is not reading its input (its buffer is full)".to_string();
        match self {
            Stdin::Pipe(p) => tokio::time::timeout(timeout, p.write_all(data))
                .await
                .map_err(|_| full())?
                .map_err(|e| format!("stdin: {e}")),
            Stdin::Terminal(master) => tokio::time::timeout(timeout, write_master(master, data))
                .await
                .map_err(|_| full())?
                .map_err(|e| format!("terminal: {e}")),
        }
    }
}

async fn write_master(master: &AsyncFd<File>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = master
            .async_io(Interest::WRITABLE, |f| io::Write::write(&mut &*f, data))
            .await?;
        data = &data[n..];
    }
    Ok(())
}

/// The broker's ends of a process's stdio.
pub(super) struct Ends {
    /// What the stage gets on `PROCESS_STDIO_FD`.
    pub(super) theirs: Option<OwnedFd>,
    /// Where input goes.
    pub(super) stdin: Option<Stdin>,
    /// The terminal's master, for output and resizing.
    pub(super) master: Option<Arc<AsyncFd<File>>>,
}

/// Open the stdio `stdin`/`pty` ask for.
pub(super) fn open(stdin: bool, pty_size: Option<(u16, u16)>) -> io::Result<(ProcessStdio, Ends)> {
    if let Some((rows, cols)) = pty_size {
        let (master, slave) = pty::open_pair(rows, cols).map_err(io::Error::other)?;
        set_nonblocking(&master)?;
        // `AsyncFd::new` is deprecated for inner types that do not own their descriptor; a
        // `File` owns it (and `register`, its replacement, is `unsafe`, which this crate has
        // none of).
        #[allow(deprecated, reason = "the File owns the descriptor it registers")]
        let master = Arc::new(AsyncFd::new(File::from(master))?);
        return Ok((
            ProcessStdio::Terminal,
            Ends {
                theirs: Some(slave),
                stdin: Some(Stdin::Terminal(Arc::clone(&master))),
                master: Some(master),
            },
        ));
    }
    if !stdin {
        return Ok((
            ProcessStdio::Null,
            Ends {
                theirs: None,
                stdin: None,
                master: None,
            },
        ));
    }
    let (sender, receiver) = tokio::net::unix::pipe::pipe()?;
    let theirs = receiver.into_blocking_fd()?;
    Ok((
        ProcessStdio::Pipe,
        Ends {
            theirs: Some(theirs),
            stdin: Some(Stdin::Pipe(sender)),
            master: None,
        },
    ))
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    airlock_jail::fd::set_nonblocking(fd.as_fd()).map_err(io::Error::other)
}

/// Read the process's output into its log until every writer is gone.
pub(super) fn read_output(
    log: &Arc<OutputLog>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    master: Option<Arc<AsyncFd<File>>>,
) -> JoinHandle<()> {
    let p = Arc::clone(log);
    tokio::spawn(async move {
        let out = async {
            match (&master, stdout) {
                (Some(m), _) => read_master(&p, m).await,
                (None, Some(s)) => read_pipe(&p, s, ProcessStream::Stdout).await,
                (None, None) => {}
            }
        };
        let err = async {
            // A terminal's stderr is the terminal; the stage's own stderr still says why a
            // layer failed before the process started, which the start already reported.
            if master.is_none() {
                if let Some(s) = stderr {
                    read_pipe(&p, s, ProcessStream::Stderr).await;
                }
            }
        };
        tokio::join!(out, err);
    })
}

async fn read_pipe(
    p: &OutputLog,
    mut pipe: impl tokio::io::AsyncRead + Unpin,
    stream: ProcessStream,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => p.push(stream, buf[..n].to_vec()),
        }
    }
}

async fn read_master(p: &OutputLog, master: &AsyncFd<File>) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let read = master
            .async_io(Interest::READABLE, |f| io::Read::read(&mut &*f, &mut buf))
            .await;
        match read {
            // EIO: every slave is closed (the terminal's processes are gone).
            Ok(0) | Err(_) => return,
            Ok(n) => p.push(ProcessStream::Pty, buf[..n].to_vec()),
        }
    }
}
