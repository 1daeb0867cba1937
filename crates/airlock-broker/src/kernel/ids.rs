//! The ids of the broker's requests to a kernel.
use airlock_protocol::Id;

/// `what` and 64 random bits: no earlier cell can forge the answer to a later request (the
/// program cannot know the id before the request arrives).
pub(super) fn request_id(what: &str) -> Id {
    let mut b = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .map_or(0, |()| u64::from_ne_bytes(b));
    Id::String(format!("{what}-{random:016x}"))
}
