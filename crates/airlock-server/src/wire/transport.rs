//! What a transport hands a session and what it takes back: the one seam between the
//! JSON-RPC session logic and the bytes of WebSocket or Content-Length framing.
use airlock_protocol::{ErrorObject, Message};

/// Events from the orchestrator, in arrival order. The channel closing means the peer is gone.
#[derive(Debug)]
pub enum Inbound {
    /// A well-formed message.
    Message(Message),
    /// A message that could not be decoded; the stream is still in sync (answered with a
    /// null-id error).
    Invalid(ErrorObject),
    /// A message over the cap (answered `program_too_large`, null id). `fatal` when the
    /// transport cannot resynchronise after it.
    TooLarge {
        /// The declared or received size.
        len: u64,
        /// Whether the connection ends here.
        fatal: bool,
    },
    /// The peer broke the framing; nothing more will be read. Answered, then closed.
    Fatal(ErrorObject),
}

/// Why the broker closes a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseKind {
    /// The peer went away or the session ended normally.
    Normal,
    /// The server is shutting down.
    GoingAway,
    /// The peer broke the protocol.
    Protocol,
    /// The peer sent a message over the cap.
    TooBig,
}

/// What the session asks a transport to send.
#[derive(Debug)]
pub enum Outbound {
    /// One message.
    Message(Message),
    /// Close the connection (after everything queued before it).
    Close(CloseKind),
}
