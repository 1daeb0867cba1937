//! Sealing a forkable kernel before its fork: a stage of its own (`airlock __executor`, the
//! `seal` frame) makes the kernel's `/work`, `/tmp` and `/dev/shm` read-only in the kernel's
//! mount namespace, so every branch is born with them read-only and locked: no branch can
//! write what a sibling reads in the moments before each gets its own.
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use airlock_executor::config::{HostId, SealConfig, SEAL_METHOD};
use airlock_protocol::{FrameReader, Message};

use crate::refusal::refusal_of;
use crate::stage::{StageLaunch, StageOutput};

/// How long the sealing stage may take.
const SEAL_TIMEOUT: Duration = Duration::from_secs(10);
/// Its answer is one small frame.
const MAX_ANSWER: u64 = 64 * 1024;

/// Seal the kernel `kernel_pid` of a sandbox owned by `owner`.
pub(super) async fn seal(
    executor: &Path,
    owner: Option<HostId>,
    kernel_pid: i32,
) -> Result<(), String> {
    let executor = executor.to_path_buf();
    tokio::task::spawn_blocking(move || seal_blocking(&executor, owner, kernel_pid))
        .await
        .map_err(|e| format!("the sealing task failed: {e}"))?
}

fn seal_blocking(executor: &Path, owner: Option<HostId>, kernel_pid: i32) -> Result<(), String> {
    let (ours, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
    let mut cmd = crate::stage::command(StageLaunch {
        executor,
        socket: OwnedFd::from(theirs),
        fds: Vec::new(),
        output: StageOutput::Discarded,
        own_group: false,
    })
    .map_err(|e| format!("the sealing stage: {e}"))?;
    let mut child = cmd.spawn().map_err(|e| format!("the sealing stage: {e}"))?;
    drop(cmd);
    let config = SealConfig {
        identity: owner,
        kernel_pid,
    };
    let frame = Message::notification(SEAL_METHOD, serde_json::to_value(&config).ok());
    let answer = airlock_protocol::write_message(&mut &ours, &frame)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            ours.set_read_timeout(Some(SEAL_TIMEOUT))
                .map_err(|e| e.to_string())?;
            FrameReader::new((&ours).take(MAX_ANSWER))
                .read_message()
                .map_err(|e| e.to_string())
        });
    let _ = child.kill();
    let _ = child.wait();
    match answer {
        Ok(Some(Message::Notification(n))) if n.method == "sealed" => Ok(()),
        Ok(Some(Message::Notification(n))) if n.method == "refused" => Err(refusal_of(n.params)),
        Ok(_) => Err("the sealing stage ended without an answer".into()),
        Err(e) => Err(format!("the sealing stage: {e}")),
    }
}
