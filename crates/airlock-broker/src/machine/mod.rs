//! A sandbox's machine and its background processes.
//!
//! A sandbox whose spec asks for `processes` (or `ports`) gets a machine when its root is made:
//! a reaper that is pid 1 of the sandbox's own pid namespace and holds the network, ipc, uts
//! and mount namespaces every later run and process of the sandbox joins (`init`). A run joins
//! them with a pid namespace of its own, as before (no process outlives a run); a background
//! process (`process`, its stdio in `stdio`, its output in `output_log`) is a process of the
//! machine's pid namespace itself, and lives until it exits, is signalled, or the machine
//! ends — at disposal, idle reclaim, or the broker's death (the init's socket closes, pid 1
//! exits, the kernel kills everything in the namespace).
pub(crate) mod init;
mod output_log;
mod process;
mod stdio;
mod table;
pub(crate) mod watchdog;

pub use init::{Machine, MachineError, SandboxNamespaces};
pub use output_log::{Exit, OutputLog, ProcessEvent, ProcessStream, Recent, KEPT_BYTES};
pub use process::{signal_number, Process, ProcessError, ProcessRequest, SIGNALS};
pub use table::{Processes, MAX_PROCESSES};
