//! How a stage tells the broker, by its exit status alone, that it refused.

/// Exit status of a stage that refused to run (a layer could not be applied).
pub const EXIT_REFUSED: i32 = 70;
