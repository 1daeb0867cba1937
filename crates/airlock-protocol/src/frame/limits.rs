//! The bounds a frame reader enforces and a writer respects.

/// The one message-size cap, in bytes, that holds on both hops (1 MiB).
///
/// A frame body larger than this is refused by readers and writers alike; the outer
/// WebSocket transport uses the same number as its maximum message size.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// Default cap on the header section, terminator included (4 KiB).
///
/// A conforming header is `Content-Length: 1048576\r\n\r\n` (28 bytes) plus perhaps a
/// `Content-Type` line; 4 KiB leaves room for tolerated extras and no room for abuse.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 4 * 1024;

/// The bounds a reader enforces and a writer respects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Largest accepted body (`Content-Length`), in bytes.
    pub max_body: usize,
    /// Largest accepted header section including the final `\r\n\r\n`, in bytes.
    pub max_header_bytes: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            max_body: DEFAULT_MAX_MESSAGE_BYTES,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
        }
    }
}
