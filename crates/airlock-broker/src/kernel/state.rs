//! A kernel's state across pause and resume: between cells the broker asks the kernel to
//! `save` (it streams its pickled scope back as `state` chunks, then answers what it kept and
//! what it could not), and a kernel started for a resumed sandbox gets those bytes back as
//! `load` chunks right after its first `execute`. The bytes are the sandbox's own: the broker
//! counts, bounds and stores them, never reads them.
use std::collections::BTreeMap;
use std::time::Duration;

use airlock_protocol::{Id, Message};
use base64::Engine;
use serde_json::{json, Value};

use super::guard::Guard;
use super::live::Live;
use super::signals::{signal_kernel, stop_kernel, SIGCONT};
use crate::run::channel::Outbox;
use crate::run::launched::Launched;
use crate::run::supervise::WATCHDOG_PERIOD;

/// Largest state chunk the broker sends in one `load` notification (before base64).
const LOAD_CHUNK: usize = ((1 << 20) - 4096) / 4 * 3;

/// What a kernel's `save` gave.
#[derive(Debug, Clone, Default)]
pub struct SavedState {
    /// The pickled scope (opaque).
    pub bytes: Vec<u8>,
    /// The names kept (at most 1000 listed).
    pub saved: Vec<String>,
    /// The names left out, and why (an open file, a generator, ...).
    pub not_saved: BTreeMap<String, String>,
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
}

/// Save `live`'s state (it is stopped between cells and stopped again afterwards). On
/// [`StateError::TooLarge`] and [`StateError::Broken`] the caller must end the kernel.
pub(super) async fn save(
    live: &mut Live,
    cap: u64,
    timeout: Duration,
) -> Result<SavedState, StateError> {
    let stage_pid = live.launched.stage_pid;
    signal_kernel(stage_pid, SIGCONT);
    let id = Id::String(format!("save-{:016x}", random_u64()));
    if !live
        .launched
        .send(Message::request(id.clone(), "save", None))
    {
        return Err(StateError::Broken("its socket is closed".into()));
    }
    let exchange = receive(&mut live.launched, &id, cap, live.limits.memory_bytes);
    let outcome = match tokio::time::timeout(timeout, exchange).await {
        Ok(r @ (Ok(_) | Err(StateError::Refused(_)))) => r,
        Ok(broken) => return broken,
        Err(_) => {
            let why = format!("no answer within {} s", timeout.as_secs());
            return Err(StateError::Broken(why));
        }
    };
    // It answered: stopped and watched again, as between any two cells.
    if !stop_kernel(stage_pid).await {
        return Err(StateError::Broken("it would not stop afterwards".into()));
    }
    live.guard = Some(Guard::start(stage_pid, live.limits.memory_bytes));
    outcome
}

/// Collect `state` chunks until the answer to `id`.
async fn receive(
    l: &mut Launched,
    id: &Id,
    cap: u64,
    memory: u64,
) -> Result<SavedState, StateError> {
    let mut bytes = Vec::new();
    let mut watchdog = tokio::time::interval(WATCHDOG_PERIOD);
    loop {
        let msg = tokio::select! {
            m = l.recv() => m,
            _ = watchdog.tick() => {
                if airlock_jail::procfs::tree_rss_bytes(l.stage_pid) > memory {
                    return Err(StateError::Broken("it went over its memory limit".into()));
                }
                continue;
            }
        };
        match msg {
            Some(Message::Notification(n)) if n.method == "state" => {
                chunk(&mut bytes, n.params.as_ref(), cap)?;
            }
            Some(Message::Response(r)) if r.id.as_ref() == Some(id) => {
                return answered(bytes, r.outcome.map_err(|e| e.message));
            }
            Some(_) => return Err(StateError::Broken("an unexpected message".into())),
            None => return Err(StateError::Broken("its socket closed".into())),
        }
    }
}

/// Add one `state` chunk (or start over on `reset`).
fn chunk(bytes: &mut Vec<u8>, params: Option<&Value>, cap: u64) -> Result<(), StateError> {
    let p = params.unwrap_or(&Value::Null);
    if p["reset"] == Value::Bool(true) {
        bytes.clear();
        return Ok(());
    }
    let Some(data) = p["data"].as_str() else {
        return Err(StateError::Broken("a state chunk without data".into()));
    };
    if (bytes.len() + data.len() / 4 * 3) as u64 > cap {
        return Err(StateError::TooLarge(cap >> 20));
    }
    base64::engine::general_purpose::STANDARD
        .decode_vec(data, bytes)
        .map_err(|_| StateError::Broken("a state chunk that is not base64".into()))?;
    if bytes.len() as u64 > cap {
        return Err(StateError::TooLarge(cap >> 20));
    }
    Ok(())
}

/// The kernel's answer: what it kept must be what it sent.
fn answered(bytes: Vec<u8>, outcome: Result<Value, String>) -> Result<SavedState, StateError> {
    let v = outcome.map_err(|m| StateError::Refused(m.chars().take(500).collect()))?;
    if v["bytes"].as_u64() != Some(bytes.len() as u64) {
        return Err(StateError::Broken(
            "its answer does not match what it sent".into(),
        ));
    }
    let saved = v["saved"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(|s| s.chars().take(200).collect()))
                .take(1000)
                .collect()
        })
        .unwrap_or_default();
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
    Ok(SavedState {
        bytes,
        saved,
        not_saved,
    })
}

/// Send a saved state to a kernel whose first `execute` said `restore`, as it reads: a task
/// beside the cell's supervision (its clock, watchdog and cancel cover the load; abort the
/// task when the cell ends).
pub(super) fn load(out: Outbox, state: Vec<u8>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut chunks = state.chunks(LOAD_CHUNK).peekable();
        if chunks.peek().is_none() {
            let _ = out.send(load_frame(&[], true)).await;
            return;
        }
        while let Some(c) = chunks.next() {
            if out
                .send(load_frame(c, chunks.peek().is_none()))
                .await
                .is_err()
            {
                return;
            }
        }
    })
}

fn load_frame(data: &[u8], last: bool) -> Message {
    let data = base64::engine::general_purpose::STANDARD.encode(data);
    Message::notification("load", Some(json!({ "data": data, "last": last })))
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .map_or(0, |()| u64::from_ne_bytes(b))
}
