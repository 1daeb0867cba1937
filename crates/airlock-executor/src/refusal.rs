//! A set-up step that failed, named by the layer it belongs to, and how a stage (a run's, a
//! machine's init) reports it to the broker and ends.
use airlock_jail::process;

use crate::channel::Channel;
use crate::exit_status::EXIT_REFUSED;

/// A setup step that failed, named by the layer it belongs to.
#[derive(Debug)]
pub(crate) struct Refusal {
    /// The layer.
    pub(crate) layer: &'static str,
    /// What failed.
    pub(crate) message: String,
}

/// Names the layer of a failed step.
pub(crate) trait Layer<T> {
    fn layer(self, layer: &'static str) -> Result<T, Refusal>;
}

impl<T, E: std::fmt::Display> Layer<T> for Result<T, E> {
    fn layer(self, layer: &'static str) -> Result<T, Refusal> {
        self.map_err(|e| Refusal {
            layer,
            message: e.to_string(),
        })
    }
}

/// Report the refusal and end: `_exit`, since a zygote's child shares a copy of the zygote's
/// address space and must run none of its exit handlers.
pub(crate) fn refuse(chan: &mut Channel, r: &Refusal) -> ! {
    chan.refuse(r.layer, &r.message);
    process::exit_now(EXIT_REFUSED)
}
