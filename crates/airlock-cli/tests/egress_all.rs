//! Allowlist egress end to end through the real binary, on loopback only: stand-in servers
//! on 127.0.0.2/127.0.0.3 (and 127.0.0.1 for the rebinding-style case), each counting the
//! connections it sees, so "denied" is asserted by what the server did not get. Every test
//! runs as the invoking user and, when that is root, as the unprivileged `airlock-test`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test, with its location"
)]

#[path = "sandbox/support.rs"]
#[allow(
    dead_code,
    reason = "shared with the sandbox suite; not every helper is used here"
)]
mod support;

mod egress;
