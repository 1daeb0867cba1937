//! The ids of the broker's requests to a kernel.
use airlock_protocol::Id;

/// `what` and 64 random bits: no earlier cell can forge the answer to a later request (the
/// program cannot know the id before the request arrives).
pub(super) fn request_id(what: &str) -> Id {
    // The kernel's CSPRNG does not fail on a kernel airlock runs on (getrandom(2) is older
    // than every layer it needs); if it ever did, the id would be guessable: stop.
    let random = getrandom::u64().unwrap_or_else(|e| panic!("no randomness from the kernel: {e}"));
    Id::String(format!("{what}-{random:016x}"))
}
