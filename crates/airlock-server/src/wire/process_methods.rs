//! The names of the `process.*` methods (`crate::wire::process_api` serves them).
use airlock_protocol::method as m;

/// The process methods.
pub const PROCESS_METHODS: [&str; 8] = [
    m::PROCESS_START,
    m::PROCESS_LIST,
    m::PROCESS_INPUT,
    m::PROCESS_CLOSE_STDIN,
    m::PROCESS_RESIZE,
    m::PROCESS_SIGNAL,
    m::PROCESS_WAIT,
    m::PROCESS_OUTPUT,
];
/// Whether `method` is a process method.
#[must_use]
pub fn is_process_method(method: &str) -> bool {
    PROCESS_METHODS.contains(&method)
}
