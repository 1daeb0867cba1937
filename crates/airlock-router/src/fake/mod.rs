//! The in-process fake backend `none`, for tests.
//!
//! It declares [`Isolation::None`] (it draws no boundary: everything runs in the test
//! process), keeps files in memory, emulates a handful of POSIX commands and a handful of
//! Python statements, and records commands and programs in separate lists so that a test
//! asserting a program ran is not satisfied by a command containing the same text.
//! [`Fault`]s make it misbehave on purpose, so the conformance suites can be shown to fail.

mod backend;
mod fault;
mod interp;
mod sandbox;

pub use backend::{fake_declarations, FakeBackend};
pub use fault::Fault;
pub use sandbox::{FakeOutput, FakeSandbox};
