//! `libairlock_zygote.so`: three C entry points over [`airlock_executor::zygote`], for the
//! zygote interpreter (`guest/zygote.py`) to call through ctypes. No `unsafe` here: the
//! functions take and return integers only; every raw syscall is in `airlock-jail`.
use std::ffi::c_long;

use airlock_executor::zygote::{self, Forked, Request};

/// The request protocol version ([`zygote::ABI`]); the interpreter checks it against the
/// broker's before serving.
#[no_mangle]
pub extern "C" fn airlock_zygote_abi() -> c_long {
    zygote::ABI as c_long
}

/// The build fingerprint ([`zygote::build`]); the interpreter checks it against the broker's.
#[no_mangle]
pub extern "C" fn airlock_zygote_build() -> c_long {
    zygote::build() as c_long
}

/// Block for the broker's next request: 1 held, -1 the broker is gone, -2 a malformed request
/// (answered). Called without the GIL.
#[no_mangle]
pub extern "C" fn airlock_zygote_wait() -> c_long {
    match zygote::wait() {
        Request::Ready => 1,
        Request::Closed => -1,
        Request::Refused => -2,
    }
}

/// Fork the held request's stage: its pid in the zygote, 0 in the child (pid 1 of the run,
/// isolated up to seccomp), -2 on failure (answered). Called with the GIL held, between
/// `PyOS_BeforeFork` and `PyOS_AfterFork_*`, as `os.fork` does.
#[no_mangle]
pub extern "C" fn airlock_zygote_fork() -> c_long {
    match zygote::fork() {
        Forked::Stage(pid) => c_long::from(pid),
        Forked::Guest => 0,
        Forked::Failed => -2,
    }
}
