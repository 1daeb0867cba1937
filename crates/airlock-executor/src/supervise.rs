//! The stage after its fork: it supervises the one child it forked (a run's pid 1, a
//! background process, a machine's init), forwarding the broker's signals, and exits the way
//! the child did, so that the broker reads the child's end from the stage's.
use std::io::Write;

use airlock_jail::process;

use crate::channel::Channel;
use crate::exit_status::EXIT_REFUSED;

/// What the stage passes on to its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Forward {
    /// SIGTERM, SIGINT and SIGHUP, to the child (a run's pid 1, a machine's init).
    Termination,
    /// The broker's signals, to the child's whole process group (a background process).
    Group,
}

/// The stage after fork: pass the broker's signals on (`forward`), reap the child, exit the
/// way it did. Only the child talks to the broker from here on: the broker must see EOF when
/// it dies.
pub(crate) fn supervise(chan: Channel, child: i32, forward: Forward) -> ! {
    drop(chan);
    let forwarding = match forward {
        Forward::Termination => process::forward_termination_signals(child),
        Forward::Group => process::forward_signals_to_group(child),
    };
    if let Err(e) = forwarding {
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
