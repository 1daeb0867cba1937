//! A kernel's state across pause and resume: between cells the broker asks the kernel to
//! `save` (it streams its pickled scope back as `state` chunks, then answers what it kept and
//! what it could not), and a kernel started for a resumed sandbox gets those bytes back as
//! `load` chunks right after its first `execute`. The bytes are the sandbox's own: the broker
//! counts, bounds and stores them, never reads them, and holds them in an unnamed file of the
//! caller's spool directory, never in its memory (a hostile kernel's state is as large as the
//! bound allows).
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use airlock_protocol::{Id, Message};
use base64::Engine;
use serde_json::{json, Value};

use super::guard::Guard;
use super::live::Live;
use super::procs::Procs;
use super::signals::{signal_kernel, stop_kernel, SIGCONT};
use crate::run::{Launched, Outbox, WATCHDOG_PERIOD};

/// Largest state chunk the broker sends in one `load` notification (before base64).
const LOAD_CHUNK: usize = ((1 << 20) - 4096) / 4 * 3;

/// What a kernel's `save` gave.
pub struct SavedState {
    /// The state's bytes: the pickled scope (opaque) in an unnamed spool file from its
    /// start, or the kernel's process image read from its memory as it is taken
    /// (`image.rs`; the kernel must stay stopped until it is read).
    pub bytes: Box<dyn std::io::Read + Send>,
    /// Its length.
    pub len: u64,
    /// The names kept (at most 1000 listed).
    pub saved: Vec<String>,
    /// The names left out, and why (an open file, a generator, ...).
    pub not_saved: BTreeMap<String, String>,
    /// How the state is carried: `"image"` (the kernel's process image) or `"pickle"`.
    pub carried: &'static str,
}

impl std::fmt::Debug for SavedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedState")
            .field("len", &self.len)
            .field("saved", &self.saved.len())
            .finish_non_exhaustive()
    }
}

/// Why a kernel's state could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The kernel answered with an error (its state stays as it was).
    #[error("the kernel could not save its state: {0}")]
    Refused(String),
    /// The state is larger than the bound; the kernel was ended.
    #[error("the kernel's state is larger than {0} MiB; the kernel was ended")]
    TooLarge(u64),
    /// The kernel broke the exchange (or died, or overran its memory); it was ended.
    #[error("the kernel's state could not be saved: {0}; the kernel was ended")]
    Broken(String),
    /// The spool file could not be made or written (the kernel stays).
    #[error("the kernel's state could not be spooled: {0}")]
    Spool(#[from] std::io::Error),
}

/// Save `live`'s state (it is stopped between cells and stopped again afterwards). On
/// [`StateError::TooLarge`] and [`StateError::Broken`] the caller must end the kernel.
pub(super) async fn save(
    live: &mut Live,
    cap: u64,
    spool: &Path,
    timeout: Duration,
) -> Result<SavedState, StateError> {
    let file = tempfile::tempfile_in(spool)?;
    let procs = live.procs();
    signal_kernel(procs, SIGCONT);
    let id = super::ids::request_id("save");
    if !live
        .launched
        .send(Message::request(id.clone(), "save", None))
    {
        return Err(StateError::Broken("its socket is closed".into()));
    }
    let exchange = receive(
        &mut live.launched,
        procs,
        &id,
        file,
        cap,
        live.limits.memory_bytes,
    );
    let outcome = match tokio::time::timeout(timeout, exchange).await {
        Ok(r @ (Ok(_) | Err(StateError::Refused(_) | StateError::Spool(_)))) => r,
        Ok(broken) => return broken,
        Err(_) => {
            let why = format!("no answer within {} s", timeout.as_secs());
            return Err(StateError::Broken(why));
        }
    };
    // It answered: stopped and watched again, as between any two cells.
    if !stop_kernel(procs).await {
        return Err(StateError::Broken("it would not stop afterwards".into()));
    }
    live.guard = Some(Guard::start(procs, live.limits.memory_bytes));
    outcome
}

/// Collect `state` chunks until the answer to `id`.
async fn receive(
    l: &mut Launched,
    procs: Procs,
    id: &Id,
    file: File,
    cap: u64,
    memory: u64,
) -> Result<SavedState, StateError> {
    let mut spool = Spool {
        file,
        len: 0,
        buf: Vec::new(),
    };
    let mut watchdog = tokio::time::interval(WATCHDOG_PERIOD);
    loop {
        let msg = tokio::select! {
            m = l.recv() => m,
            _ = watchdog.tick() => {
                if procs.rss() > memory {
                    return Err(StateError::Broken("it went over its memory limit".into()));
                }
                continue;
            }
        };
        match msg {
            Some(Message::Notification(n)) if n.method == "state" => {
                spool.chunk(n.params.as_ref(), cap)?;
            }
            Some(Message::Response(r)) if r.id.as_ref() == Some(id) => {
                return answered(spool, r.outcome.map_err(|e| e.message));
            }
            Some(_) => return Err(StateError::Broken("an unexpected message".into())),
            None => return Err(StateError::Broken("its socket closed".into())),
        }
    }
}

/// The state as it arrives: decoded chunk by chunk into the spool file.
struct Spool {
    file: File,
    len: u64,
    buf: Vec<u8>,
}

impl Spool {
    /// Add one `state` chunk (or start over on `reset`).
    fn chunk(&mut self, params: Option<&Value>, cap: u64) -> Result<(), StateError> {
        let p = params.unwrap_or(&Value::Null);
        if p["reset"] == Value::Bool(true) {
            self.file.set_len(0)?;
            self.file.seek(SeekFrom::Start(0))?;
            self.len = 0;
            return Ok(());
        }
        let Some(data) = p["data"].as_str() else {
            return Err(StateError::Broken("a state chunk without data".into()));
        };
        if self.len + (data.len() / 4 * 3) as u64 > cap {
            return Err(StateError::TooLarge(cap >> 20));
        }
        self.buf.clear();
        base64::engine::general_purpose::STANDARD
            .decode_vec(data, &mut self.buf)
            .map_err(|_| StateError::Broken("a state chunk that is not base64".into()))?;
        self.file.write_all(&self.buf)?;
        self.len += self.buf.len() as u64;
        Ok(())
    }
}

/// The names a kernel says it kept (`saved`), bounded: at most 1000, each within 200 chars.
pub(super) fn saved_names(v: &Value) -> Vec<String> {
    v["saved"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(|s| s.chars().take(200).collect()))
                .take(1000)
                .collect()
        })
        .unwrap_or_default()
}

/// The kernel's answer: what it kept must be what it sent.
fn answered(spool: Spool, outcome: Result<Value, String>) -> Result<SavedState, StateError> {
    let v = outcome.map_err(|m| StateError::Refused(m.chars().take(500).collect()))?;
    if v["bytes"].as_u64() != Some(spool.len) {
        return Err(StateError::Broken(
            "its answer does not match what it sent".into(),
        ));
    }
    let saved = saved_names(&v);
    let not_saved = v["not_saved"]
        .as_object()
        .map(|o| {
            o.iter()
                .take(1000)
                .map(|(k, why)| {
                    let why = why.as_str().unwrap_or("").chars().take(200).collect();
                    (k.chars().take(200).collect(), why)
                })
                .collect()
        })
        .unwrap_or_default();
    let Spool { mut file, len, .. } = spool;
    file.seek(SeekFrom::Start(0))?;
    Ok(SavedState {
        bytes: Box::new(file),
        len,
        saved,
        not_saved,
        carried: "pickle",
    })
}

/// Send a saved state (a spool file, read from its start) to a kernel whose first `execute`
/// said `restore`, as it reads: a task beside the cell's supervision (its clock, watchdog and
/// cancel cover the load; abort the task when the cell ends).
pub(super) fn load(out: Outbox, state: File) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::io::AsyncSeekExt;
        let mut file = tokio::fs::File::from_std(state);
        let Ok(len) = file.seek(SeekFrom::End(0)).await else {
            return;
        };
        if file.seek(SeekFrom::Start(0)).await.is_err() {
            return;
        }
        let mut chunk = vec![0u8; LOAD_CHUNK];
        let mut sent = 0u64;
        loop {
            let n = read_full(&mut file, &mut chunk).await;
            sent += n as u64;
            // The last frame says so (an empty state is one empty last frame; a read that
            // fails ends it short, and the kernel's unpickling says what was lost).
            let last = n == 0 || sent >= len;
            if out.send(load_frame(&chunk[..n], last)).await.is_err() || last {
                return;
            }
        }
    })
}

/// Fill `buf` from `file` as far as it goes (0 at the end or on an error).
async fn read_full(file: &mut tokio::fs::File, buf: &mut [u8]) -> usize {
    use tokio::io::AsyncReadExt;
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
}

fn load_frame(data: &[u8], last: bool) -> Message {
    let data = base64::engine::general_purpose::STANDARD.encode(data);
    Message::notification("load", Some(json!({ "data": data, "last": last })))
}
