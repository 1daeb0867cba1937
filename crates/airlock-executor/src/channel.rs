//! The stage's end of the socket to the broker: blocking, framed, capped.
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use airlock_protocol::{FrameReader, Message};
use serde_json::{json, Value};

use crate::config::{
    AssembleConfig, ExecutorConfig, InitConfig, SealConfig, ASSEMBLE_METHOD, INIT_METHOD,
    SEAL_METHOD, SETUP_METHOD,
};

/// The frame that opens a stage's life: a run, or the assembly of a sandbox's root.
#[derive(Debug)]
pub enum First {
    /// Isolate and run.
    Setup(Box<ExecutorConfig>),
    /// Build a sandbox root and hand it back.
    Assemble(AssembleConfig),
    /// Start a sandbox's machine (its reaper pid 1) and hand its namespaces back.
    Init(InitConfig),
    /// Seal a forkable kernel's writable mounts before its fork.
    Seal(SealConfig),
}

/// A framed connection to the broker.
#[derive(Debug)]
pub struct Channel {
    reader: FrameReader<UnixStream>,
}

/// Why the channel could not deliver what the stage needed.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The socket failed.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// The broker sent something the stage cannot use.
    #[error("protocol: {0}")]
    Protocol(String),
}

impl Channel {
    /// Take the socket the broker passed as stdin (duplicated; fd 0 is replaced later).
    pub fn from_stdin() -> Result<Self, ChannelError> {
        Ok(Self::from_owned(io::stdin().as_fd().try_clone_to_owned()?))
    }

    /// Wrap an owned socket fd.
    pub fn from_owned(fd: OwnedFd) -> Self {
        Self {
            reader: FrameReader::new(UnixStream::from(fd)),
        }
    }

    /// The socket, borrowed (for moving it to the fd the guest expects).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.reader.get_ref().as_fd()
    }

    /// Read the next message; end of stream is an error here (the stage always expects one).
    pub fn next_message(&mut self) -> Result<Message, ChannelError> {
        match self.reader.read_message() {
            Ok(Some(msg)) => Ok(msg),
            Ok(None) => Err(ChannelError::Protocol("broker closed the socket".into())),
            Err(e) => Err(ChannelError::Protocol(e.to_string())),
        }
    }

    /// Read the `setup` or `assemble` notification that opens every stage.
    pub fn read_first(&mut self) -> Result<First, ChannelError> {
        let bad = |e: serde_json::Error| ChannelError::Protocol(format!("bad setup: {e}"));
        match self.next_message()? {
            Message::Notification(n) if n.method == SETUP_METHOD => {
                let params = n.params.unwrap_or(Value::Null);
                serde_json::from_value(params)
                    .map(First::Setup)
                    .map_err(bad)
            }
            Message::Notification(n) if n.method == ASSEMBLE_METHOD => {
                let params = n.params.unwrap_or(Value::Null);
                serde_json::from_value(params)
                    .map(First::Assemble)
                    .map_err(bad)
            }
            Message::Notification(n) if n.method == SEAL_METHOD => {
                let params = n.params.unwrap_or(Value::Null);
                serde_json::from_value(params).map(First::Seal).map_err(bad)
            }
            Message::Notification(n) if n.method == INIT_METHOD => {
                let params = n.params.unwrap_or(Value::Null);
                serde_json::from_value(params).map(First::Init).map_err(bad)
            }
            other => Err(ChannelError::Protocol(format!(
                "expected setup, got {other:?}"
            ))),
        }
    }

    /// Send a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), ChannelError> {
        let msg = Message::notification(method, Some(params));
        let mut writer: &UnixStream = self.reader.get_ref();
        airlock_protocol::write_message(&mut writer, &msg)
            .map_err(|e| ChannelError::Protocol(e.to_string()))
    }

    /// Tell the broker this stage refuses to run, and why.
    pub fn refuse(&mut self, layer: &str, message: &str) {
        // Best effort: if the socket is gone the broker sees EOF and the exit status anyway.
        let _ = self.notify("refused", json!({ "layer": layer, "message": message }));
    }
}
