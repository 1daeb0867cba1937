//! The error of assembling a sandbox's root.

/// A failed step, named by what it was doing.
#[derive(Debug)]
pub struct AssembleError {
    /// The step.
    pub step: &'static str,
    /// What went wrong.
    pub message: String,
}

/// Wrap any error as the failure of `step`.
pub(crate) fn at<E: std::fmt::Display>(step: &'static str) -> impl FnOnce(E) -> AssembleError {
    move |e| AssembleError {
        step,
        message: e.to_string(),
    }
}
