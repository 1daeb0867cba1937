//! What a stage says when it refuses: a `refused` notification naming the layer that is
//! missing, turned into the one sentence every caller reports.
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use airlock_protocol::{FrameReader, Message};
use serde_json::Value;

/// Cap on what a stage may write back as its refusal.
const MAX_REFUSAL_BYTES: u64 = 64 * 1024;

/// A `refused` notification's layer and message, as the run's refusal.
pub(crate) fn refusal_of(params: Option<Value>) -> String {
    let params = params.unwrap_or(Value::Null);
    let layer = params["layer"].as_str().unwrap_or("unknown");
    let message = params["message"].as_str().unwrap_or("");
    format!("sandbox layer {layer} unavailable: {message}")
}

/// The `refused` message a stage wrote on `sock` before it exited, read with a cap (blocking,
/// at most 2 s); `silent` when it wrote none.
pub(crate) fn read_refusal(sock: UnixStream, silent: &str) -> String {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(2)));
    let mut reader = FrameReader::new(sock.take(MAX_REFUSAL_BYTES));
    match reader.read_message() {
        Ok(Some(Message::Notification(n))) if n.method == "refused" => refusal_of(n.params),
        _ => silent.into(),
    }
}
