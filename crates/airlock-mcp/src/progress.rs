//! Streamed output as MCP progress notifications, when the client sent a progress token.
//!
//! The run's output tap ([`OutputTap`]) hands over chunks as the program writes them (within
//! the output cap); each becomes one `notifications/progress` with `progress` = output bytes
//! so far (strictly increasing), `message` = the chunk's text, and `_meta["airlock/stream"]` =
//! `stdout` or `stderr`. A UTF-8 sequence cut between chunks is carried to the next chunk of
//! its stream. The tap never blocks the run: a client that does not keep up loses chunks
//! (the final result still carries the whole captured output).
use airlock_broker::output::{OutputChunk, OutputTap, Stream};
use rmcp::model::{MetaObject, NotificationMetaObject, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Undelivered chunks the tap holds before it drops.
const TAP_CHUNKS: usize = 64;

/// A tap for the run and the task forwarding it; the task ends when the run drops the tap.
pub fn start(peer: Peer<RoleServer>, token: ProgressToken) -> (OutputTap, JoinHandle<()>) {
    let (tap, rx) = OutputTap::new(TAP_CHUNKS);
    (tap, tokio::spawn(forward(rx, peer, token)))
}

/// The valid UTF-8 text of `carry + data`, keeping an incomplete trailing sequence in `carry`.
fn take_text(carry: &mut Vec<u8>, data: &[u8]) -> String {
    let mut bytes = std::mem::take(carry);
    bytes.extend_from_slice(data);
    let valid = match std::str::from_utf8(&bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    };
    *carry = bytes.split_off(valid);
    String::from_utf8_lossy(&bytes).into_owned()
}

async fn forward(
    mut rx: mpsc::Receiver<OutputChunk>,
    peer: Peer<RoleServer>,
    token: ProgressToken,
) {
    let mut carry: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut sent: u64 = 0;
    while let Some(c) = rx.recv().await {
        let slot = usize::from(c.stream == Stream::Stderr);
        let text = take_text(&mut carry[slot], &c.data);
        if text.is_empty() {
            continue;
        }
        sent = sent.saturating_add(u64::try_from(text.len()).unwrap_or(u64::MAX));
        let mut meta = serde_json::Map::new();
        meta.insert("airlock/stream".into(), json!(c.stream.as_str()));
        #[allow(
            clippy::cast_precision_loss,
            reason = "a byte count shown as progress; exact below 2^53"
        )]
        let mut p = ProgressNotificationParam::new(token.clone(), sent as f64);
        p.message = Some(text);
        p.meta = Some(NotificationMetaObject(MetaObject(meta)));
        if peer.notify_progress(p).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::take_text;

    #[test]
    fn a_cut_utf8_sequence_waits_for_its_end() {
        let mut carry = Vec::new();
        let e = "é".as_bytes();
        assert_eq!(take_text(&mut carry, &[b'a', e[0]]), "a");
        assert_eq!(take_text(&mut carry, &[e[1], b'b']), "éb");
        assert!(carry.is_empty());
    }
}
