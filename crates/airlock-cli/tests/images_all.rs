//! End-to-end tests of images: the real `airlock` binary imports images (a Debian root with
//! pandas built by mmdebstrap, and hostile ones written by hand) and runs code on them, as the
//! invoking user and, when that is root, again as the unprivileged `airlock-test` user.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test, with its location"
)]

#[path = "sandbox/support.rs"]
#[allow(
    dead_code,
    reason = "shared with the sandbox suite; this one uses part of it"
)]
mod support;

mod images;
