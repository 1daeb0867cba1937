//! The Python the guest runs, embedded in the binary.

/// The guest bootstrap that CPython runs with `-c` before the untrusted program: the protocol,
/// seccomp, attestation and one-shot run (`guest/bootstrap.py`), the stateful kernel
/// (`guest/kernel.py`) and its state's save and load
/// (`guest/kernel_state.py`), then `main()`.
pub const BOOTSTRAP_PY: &str = concat!(
    include_str!("guest/bootstrap.py"),
    include_str!("guest/kernel.py"),
    include_str!("guest/kernel_state.py"),
    "\nmain()\n"
);

/// What a zygote's interpreter runs (`-c`, with the library's path and [`crate::zygote::ABI`] as its
/// arguments): the bootstrap and kernel, then `guest/zygote.py`, which forks a child per run
/// and runs `main()` in each once it is isolated.
pub const ZYGOTE_PY: &str = concat!(
    include_str!("guest/bootstrap.py"),
    include_str!("guest/kernel.py"),
    include_str!("guest/kernel_state.py"),
    include_str!("guest/zygote.py"),
);
