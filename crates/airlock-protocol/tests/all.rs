//! The one integration-test binary of airlock-protocol; the tests live in `suite/`.

// clippy's allow-unwrap-in-tests covers `#[test]` functions only, not the shared helpers
// (encoders, readers) that panic on a failed setup step by design.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers panic on setup failure by design"
)]

mod suite;
