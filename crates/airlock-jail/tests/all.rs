//! The one integration-test binary of airlock-jail: every layer is attacked for real, mostly
//! through the single-threaded `airlock-jail-probe` helper (see `src/bin/`).

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    reason = "test helpers panic on setup failure; pids fit in i32"
)]

mod suite;
