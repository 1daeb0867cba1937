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
    /// A stand-in for the bootstrap around `guest/kernel_state.py`'s reader: `load` frames of
    /// `MIB` MiB in 1 MiB chunks, then `READ` (Python) run under tracemalloc, whose peak it prints.
    const READER_HARNESS: &str = r#"
import binascii, os, sys, tracemalloc
MAX_FRAME = 1 << 20
MIB = int(sys.argv[1])
frames = [{"method": "load", "params": {"data": binascii.b2a_base64(os.urandom(1 << 20), newline=False).decode(), "last": i == MIB - 1}} for i in range(MIB)]
def _read_frame():
    return frames.pop(0)
class _Quiet:
    def __enter__(self): return self
    def __exit__(self, *a): return False
exec(sys.stdin.read())
reader = _ChunkReader()
tracemalloc.start()
exec(sys.argv[2])
print(tracemalloc.get_traced_memory()[1] >> 20)
"#;

    /// The peak MiB Python allocated while `read` ran over a state of `mib` MiB.
    fn reader_peak_mib(mib: u32, read: &str) -> u64 {
        use std::io::Write;
        let mut child = std::process::Command::new("python3")
            .args(["-I", "-S", "-c", READER_HARNESS, &mib.to_string(), read])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let source = include_str!("guest/kernel_state.py");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(source.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// A garbage state (a `pickled` one the sandbox wrote itself) can ask the unpickler for more
    /// bytes than there are: the reader then holds the whole state once and copies it once out
    /// (it held it three times over, and a 400 MB state passed a 1 GiB kernel's limit).
    #[test]
    fn a_read_past_a_huge_states_end_copies_it_once() {
        let peak = reader_peak_mib(64, "reader.read(1 << 40)");
        assert!(peak < 64 * 2 + 8, "peak {peak} MiB for a 64 MiB state");
    }

    /// What the unpickler left unread is dropped a chunk at a time, never held whole.
    #[test]
    fn draining_a_states_rest_holds_one_chunk_at_a_time() {
        let peak = reader_peak_mib(64, "reader.read(10); reader.drain()");
        assert!(peak < 8, "peak {peak} MiB draining a 64 MiB state");
    }

    #[test]
    fn the_ipython_stand_in_embeds_as_one_raw_string() {
        let shim = include_str!("guest/ipython_display.py");
        assert!(!shim.contains("'''") && !shim.ends_with('\\'));
    }
}
