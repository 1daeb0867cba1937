//! The Python the guest runs, embedded in the binary.

/// The bootstrap and everything after it that both a cold guest and the zygote run.
macro_rules! guest_sources {
    ($($tail:expr),*) => {
        concat!(
            include_str!("guest/bootstrap.py"),
            include_str!("guest/formatter.py"),
            include_str!("guest/imports.py"),
            "\n_IPYTHON_DISPLAY = r'''",
            include_str!("guest/ipython_display.py"),
            "'''\n",
            include_str!("guest/kernel.py"),
            include_str!("guest/kernel_state.py"),
            include_str!("guest/kernel_fork.py"),
            $($tail),*
        )
    };
}

/// The guest bootstrap that CPython runs with `-c` before the untrusted program: the protocol,
/// seccomp, attestation and one-shot run (`guest/bootstrap.py`), rich output's MIME bundles
/// (`guest/formatter.py`), the import hook for matplotlib's config and the `IPython.display`
/// stand-in (`guest/imports.py`, `guest/ipython_display.py`), the stateful kernel
/// (`guest/kernel.py`), its state's save and load (`guest/kernel_state.py`) and its
/// copy-on-write fork (`guest/kernel_fork.py`), then `main()`.
pub const BOOTSTRAP_PY: &str = guest_sources!("\nmain()\n");

/// What a zygote's interpreter runs (`-c`, with the library's path and [`crate::zygote::ABI`] as its
/// arguments): the bootstrap and kernel, then `guest/zygote.py`, which forks a child per run
/// and runs `main()` in each once it is isolated.
pub const ZYGOTE_PY: &str = guest_sources!(include_str!("guest/zygote.py"));

#[cfg(test)]
mod tests {
    #[test]
    fn the_ipython_stand_in_embeds_as_one_raw_string() {
        let shim = include_str!("guest/ipython_display.py");
        assert!(!shim.contains("'''") && !shim.ends_with('\\'));
    }
}
