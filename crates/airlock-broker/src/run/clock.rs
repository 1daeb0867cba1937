//! A run's deadline to the sub-millisecond.
//!
//! tokio's timer wheel ticks in whole milliseconds, rounds a deadline up to the next tick and
//! its driver sleeps in whole milliseconds, so a bare `sleep_until` fires 0–2 ms late: ~1 ms on
//! average here, a quarter of the kill-after-timeout figure (docs/performance.md). The run's
//! clock sleeps on the wheel until shortly before the deadline and spends the rest in a
//! nanosleep on the blocking pool (a thread held for at most [`COARSE`]).
use std::time::Duration;

use tokio::time::Instant;

/// How long before the deadline the wheel hands over to a precise sleep.
const COARSE: Duration = Duration::from_millis(2);

/// Resolves at `deadline`, late by a scheduler wake-up rather than a timer tick.
pub(crate) async fn at(deadline: Instant) {
    if let Some(early) = deadline.checked_sub(COARSE) {
        tokio::time::sleep_until(early).await;
    }
    let rest = deadline.saturating_duration_since(Instant::now());
    if rest.is_zero() {
        return;
    }
    let precise = tokio::task::spawn_blocking(move || std::thread::sleep(rest));
    // The wheel stays the bound, should the blocking pool be saturated.
    tokio::select! {
        _ = precise => {}
        () = tokio::time::sleep_until(deadline) => {}
    }
}
