//! The stage after its fork: it supervises the one child it forked (a run's pid 1, a
//! background process, a machine's init), forwarding the broker's signals, and exits the way
//! the child did, so that the broker reads the child's end from the stage's.
use std::io::Write;

use airlock_jail::process;

use crate::channel::Channel;
use crate::exit_status::EXIT_REFUSED;

/// The stage of a background process after fork: forward the broker's signals to the
/// process's group, reap it, exit the way it did.
pub(crate) fn supervise_process(chan: Channel, child: i32) -> ! {
    drop(chan);
    if let Err(e) = process::forward_signals_to_group(child) {
        let _ = writeln!(std::io::stderr(), "airlock executor: signals: {e}");
    }
    match process::wait_child(child) {
        Ok(status) => process::exit_like(status),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "airlock executor: wait: {e}");
            process::exit_now(EXIT_REFUSED)
        }
    }
}

/// The stage after fork: forward termination signals, reap pid 1, exit the way it did.
pub(crate) fn supervise(chan: Channel, child: i32) -> ! {
    // Only pid 1 talks to the broker from here on; the broker must see EOF when pid 1 dies.
    drop(chan);
    if let Err(e) = process::forward_termination_signals(child) {
        let _ = writeln!(std::io::stderr(), "airlock executor: signals: {e}");
    }
    match process::wait_child(child) {
        Ok(status) => process::exit_like(status),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "airlock executor: wait: {e}");
            process::exit_now(EXIT_REFUSED)
        }
    }
}
