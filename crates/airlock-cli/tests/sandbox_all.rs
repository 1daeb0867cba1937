//! End-to-end tests of the real `airlock` binary: sanity (a sandbox that refuses everything
//! fails these) and attacks (each asserts by external evidence). Every test runs as the
//! invoking user and, when that is root, again as the unprivileged `airlock-test` user.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test, with its location"
)]

mod sandbox;
