//! The executor stage: isolate, fork pid 1 of a fresh pid namespace, supervise it.
//!
//! Order matters and is the contract documented in docs/executor.md:
//! (root broker: become the sandbox's unprivileged host id) -> join the sandbox's user and mount
//! namespaces (built by [`crate::assemble`]; a one-shot run builds them here, in the same way)
//! -> net/ipc/uts/(mount)/pid/cgroup ns -> fork ->
//! [child, pid 1] fresh /proc, pivot into the sandbox root, hostname, loopback up, fds, rlimits, Landlock,
//! drop caps, no_new_privs -> (python) execve the interpreter, whose bootstrap installs the run
//! seccomp filter | (command) install the exec filter, attest, wait for `start`, execve.
use std::convert::Infallible;
use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use airlock_jail::{caps, fdpass, identity, landlock, mounts, ns, process, rlimits, seccomp};

use crate::assemble;
use crate::channel::{Channel, First};
use crate::config::{
    AssembleConfig, ExecutorConfig, Joining, Mode, ProcessStdio, EGRESS_CHANNEL_FD,
    KERNEL_IMAGE_FD, MACHINE_NAMESPACES, PROCESS_STDIO_FD, SANDBOX_CHANNEL_FD, SANDBOX_USERNS_FD,
};
use crate::container;
use crate::enter::{enter_own_root, join_sandbox};
use crate::exit_status::EXIT_REFUSED;
use crate::guest_code::BOOTSTRAP_PY;
use crate::refusal::{refuse, Layer, Refusal};
use crate::supervise::{supervise, Forward};

/// fd of the socket inside the guest.
pub const GUEST_SOCKET_FD: i32 = 3;
/// fd of the seccomp filter pipe inside the Python guest.
pub const GUEST_FILTER_FD: i32 = 4;
/// Staging fds above anything the stage holds, so the final placement never collides.
const STAGING_SOCKET_FD: i32 = 100;
const STAGING_FILTER_FD: i32 = 101;
const STAGING_CODE_FD: i32 = 102;
/// fd of the precompiled bootstrap inside the Python guest (read, then closed, by [`LOADER`]).
pub const GUEST_CODE_FD: i32 = 5;
/// The largest code object handed in; the code pipe is made to hold it all (the code is
/// written before anyone reads it), well under the unprivileged 1 MiB pipe maximum.
const MAX_CODE_BYTES: usize = 512 * 1024;

/// What CPython runs when the broker handed in the bootstrap as a code object (compiled by this
/// very interpreter at discovery): read it from fd 5, close it, run it as `__main__`.
const LOADER: &str = r#"import marshal, posix
def _airlock_load():
    data = bytearray()
    while len(data) <= 1 << 20:
        chunk = posix.read(5, 1 << 16)
        if not chunk:
            break
        data += chunk
    posix.close(5)
    return marshal.loads(bytes(data))
exec(_airlock_load(), {'__name__': '__main__', '__builtins__': __builtins__})
"#;

/// How pid 1 hands over to the workload once every layer before seccomp is in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `execve` the interpreter or the command (the stage of `airlock __executor`).
    Exec,
    /// Return to the caller: a zygote's child, whose interpreter is already running and whose
    /// bootstrap installs seccomp and attests next (see [`crate::zygote`]).
    Return,
}

/// Entry point of `airlock __executor`. Must run before any thread exists.
pub fn stage_main() -> ! {
    let (chan, cfg) = match first_frame() {
        (chan, First::Setup(cfg)) => (chan, cfg),
        (mut chan, First::Assemble(cfg)) => match assemble::assemble(&cfg) {
            Ok(()) => std::process::exit(0),
            Err(e) => refuse(
                &mut chan,
                &Refusal {
                    layer: "sandbox root",
                    message: format!("{}: {}", e.step, e.message),
                },
            ),
        },
        (chan, First::Init(cfg)) => crate::machine_init::init_main(chan, &cfg),
        (mut chan, First::Seal(cfg)) => match crate::branch::seal(&cfg) {
            Ok(()) => {
                let _ = chan.notify("sealed", serde_json::json!({}));
                std::process::exit(0)
            }
            Err(e) => refuse(
                &mut chan,
                &Refusal {
                    layer: "fork",
                    message: format!("{}: {}", e.step, e.message),
                },
            ),
        },
    };
    run_stage(chan, &cfg, Ending::Exec);
    // Only `Ending::Return` comes back.
    process::exit_now(EXIT_REFUSED)
}

/// The stage of a zygote's child (the socket to the broker on stdin, like a spawned stage's):
/// returns only in pid 1, isolated up to seccomp, with the socket on fd 3 and the seccomp
/// filter on fd 4 — the state in which a spawned stage would `execve` the interpreter.
pub fn zygote_stage() {
    let (mut chan, cfg) = match first_frame() {
        (chan, First::Setup(cfg)) => (chan, cfg),
        (mut chan, First::Assemble(_) | First::Init(_) | First::Seal(_)) => refuse(
            &mut chan,
            &Refusal {
                layer: "zygote",
                message: "a zygote starts runs, it does not assemble sandboxes".into(),
            },
        ),
    };
    let trusted_python = matches!(cfg.mode, Mode::Python { .. }) && !cfg.untrusted_interpreter;
    if !trusted_python {
        refuse(
            &mut chan,
            &Refusal {
                layer: "zygote",
                message: "a zygote runs Python on the host's interpreter only".into(),
            },
        );
    }
    run_stage(chan, &cfg, Ending::Return);
}

/// The socket on stdin and the frame it opens with; refuses (and exits) on anything else.
fn first_frame() -> (Channel, First) {
    let mut chan = match Channel::from_stdin() {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "airlock executor: {e}");
            process::exit_now(EXIT_REFUSED);
        }
    };
    match chan.read_first().layer("setup") {
        Ok(first) => (chan, first),
        Err(r) => refuse(&mut chan, &r),
    }
}

/// Isolate and fork; the parent supervises pid 1 to its end and exits like it; pid 1 sets up
/// and either execs ([`Ending::Exec`]) or returns ([`Ending::Return`]).
fn run_stage(mut chan: Channel, cfg: &ExecutorConfig, ending: Ending) {
    let egress = match cfg.egress_proxy_port {
        Some(_) => match fdpass::take_inherited(EGRESS_CHANNEL_FD).layer("egress") {
            Ok(fd) => Some(fd),
            Err(r) => refuse(&mut chan, &r),
        },
        None => None,
    };
    match isolate(cfg) {
        Ok(process::Fork::Parent { child }) => {
            drop(egress);
            let forward = match cfg.machine {
                Some(Joining::Process { .. }) => Forward::Group,
                _ => Forward::Termination,
            };
            supervise(chan, child, forward)
        }
        Ok(process::Fork::Child) => pid1(chan, cfg, egress, ending),
        Err(r) => refuse(&mut chan, &r),
    }
}

/// Become the sandbox's host identity, join its user and mount namespaces (or build them: a
/// one-shot run), unshare every other one (and, joining, a private copy of the mount
/// namespace), then fork pid 1.
fn isolate(cfg: &ExecutorConfig) -> Result<process::Fork, Refusal> {
    // Die with the broker: a sandbox never outlives the process supervising it.
    let broker = std::os::unix::process::parent_id();
    let unshared = match (&cfg.root, cfg.machine) {
        (Some(root), _) => {
            own_root(root)?;
            ns::Namespaces {
                mount: false,
                ..ns::Namespaces::all()
            }
        }
        (None, None) => {
            join_sandbox(cfg.identity)?;
            ns::Namespaces::all()
        }
        (None, Some(joining)) => {
            join_machine(cfg, joining)?;
            // A run: a mount namespace (for its own /proc) and a pid namespace of its own; a
            // process lives in the machine's pid namespace itself.
            let run = joining == Joining::Run;
            ns::Namespaces {
                mount: run,
                pid: run,
                cgroup: true,
                ..ns::Namespaces::default()
            }
        }
    };
    if std::os::unix::process::parent_id() != broker {
        return Err(Refusal {
            layer: "pdeathsig",
            message: "broker exited during setup".into(),
        });
    }
    ns::unshare(unshared).layer("namespaces")?;
    process::fork().layer("fork")
}

/// A sandbox with a machine: its identity, its user namespace, then the machine's mount,
/// network, ipc and uts namespaces, and (a background process) its pid namespace.
fn join_machine(cfg: &ExecutorConfig, joining: Joining) -> Result<(), Refusal> {
    let userns = fdpass::take_inherited(SANDBOX_USERNS_FD).layer("sandbox")?;
    let mut joined = Vec::with_capacity(MACHINE_NAMESPACES.len());
    for (name, fd) in MACHINE_NAMESPACES {
        joined.push((name, fdpass::take_inherited(fd).layer("machine")?));
    }
    if let Some(id) = cfg.identity {
        identity::become_id(id).layer("identity")?;
    }
    process::set_parent_death_signal_kill().layer("pdeathsig")?;
    identity::join_user_namespace(userns.as_fd()).layer("userns")?;
    for (name, fd) in &joined {
        let flag = match *name {
            "mnt" => libc::CLONE_NEWNS,
            "net" => libc::CLONE_NEWNET,
            "ipc" => libc::CLONE_NEWIPC,
            "uts" => libc::CLONE_NEWUTS,
            // A run's pid namespace is its own (unshared next), not nested in the machine's.
            "pid" if joining == Joining::Run => continue,
            _ => libc::CLONE_NEWPID,
        };
        identity::join_namespace(fd.as_fd(), flag).layer("machine")?;
    }
    Ok(())
}

/// A one-shot run's sandbox: built here (identity, user and mount namespace, root), the way
/// an assembling stage builds one, and handed to the broker, which watches its disk use.
fn own_root(root: &AssembleConfig) -> Result<(), Refusal> {
    let channel = fdpass::take_inherited(SANDBOX_CHANNEL_FD).layer("sandbox")?;
    let data = assemble::build(root).map_err(|e| Refusal {
        layer: "sandbox root",
        message: format!("{}: {}", e.step, e.message),
    })?;
    assemble::hand_over(channel.as_fd(), data).map_err(|e| Refusal {
        layer: "sandbox root",
        message: format!("{}: {}", e.step, e.message),
    })
}

/// pid 1 of the run's pid namespace. Returns only with [`Ending::Return`], every layer but
/// seccomp in place and the guest's fds (socket, filter) open at their numbers.
fn pid1(mut chan: Channel, cfg: &ExecutorConfig, egress: Option<OwnedFd>, ending: Ending) {
    let staged = match prepare(&chan, cfg, egress) {
        Ok(s) => s,
        Err(r) => refuse(&mut chan, &r),
    };
    // Drop every other handle of the socket, then place it (and the filter) where the guest
    // expects them.
    drop(chan);
    let (mut guest, placed) = match place(staged) {
        Ok(placed) => placed,
        // No channel is left to report on; the broker sees EOF and this exit status.
        Err(_) => process::exit_now(EXIT_REFUSED),
    };
    if let Err(r) = lock_down(cfg, &placed) {
        refuse(&mut guest, &r)
    }
    if ending == Ending::Return {
        // The zygote inherited the broker's real-time dispositions; a cold run's interpreter
        // starts with none (its stage resets every one before execve).
        if let Err(e) = process::reset_realtime_signal_dispositions() {
            refuse(
                &mut guest,
                &Refusal {
                    layer: "signals",
                    message: e.to_string(),
                },
            )
        }
        // The interpreter that continues here reads fds 3 and 4 by number: they stay open.
        std::mem::forget(guest);
        std::mem::forget(placed);
        return;
    }
    let r = match start(&mut guest, cfg, &placed) {
        Ok(never) => match never {},
        Err(r) => r,
    };
    refuse(&mut guest, &r)
}

struct Staged {
    socket: OwnedFd,
    filter: Option<OwnedFd>,
    code: Option<OwnedFd>,
    image: Option<OwnedFd>,
}

/// The bootstrap's code object, if the broker sent one that fits a pipe.
fn bootstrap_code(cfg: &ExecutorConfig) -> Option<Vec<u8>> {
    match &cfg.mode {
        Mode::Python {
            bootstrap: Some(hex),
            ..
        } => decode_hex(hex).filter(|b| !b.is_empty() && b.len() <= MAX_CODE_BYTES),
        _ => None,
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    let digits = hex.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    digits
        .chunks(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

/// Mount, uts and network set-up, stdin, and the fds the guest needs, staged high.
fn prepare(
    chan: &Channel,
    cfg: &ExecutorConfig,
    egress: Option<OwnedFd>,
) -> Result<Staged, Refusal> {
    process::set_parent_death_signal_kill().layer("pdeathsig")?;
    match cfg.machine {
        None => enter_own_root(&cfg.hostname)?,
        // The machine's root, hostname and loopback are this process's already; a run's pid
        // namespace is its own and gets its own /proc.
        Some(Joining::Run) => mounts::mount_proc_at(Path::new("/proc"))
            .map_err(container::explain(container::PROC_MOUNT))
            .layer("proc mount")?,
        Some(Joining::Process { .. }) => {}
    }
    if let (Some(port), Some(egress)) = (cfg.egress_proxy_port, egress) {
        // The proxy listener is born here, in the sandbox's namespace, and leaves at once:
        // the broker serves it; nothing that runs later in the sandbox holds it.
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).layer("egress")?;
        fdpass::send_fd(egress.as_fd(), listener.as_fd()).layer("egress")?;
    }
    std::env::set_current_dir(&cfg.cwd).layer("work dir")?;
    set_up_stdio(cfg)?;
    let socket = airlock_jail::fd::dup_to(chan.fd(), STAGING_SOCKET_FD).layer("fds")?;
    let filter = match &cfg.mode {
        Mode::Python { .. } => {
            let bytes = if cfg.forkable {
                seccomp::compile_forkable(network(cfg))
            } else {
                seccomp::compile_for(seccomp::Profile::Run, network(cfg))
            }
            .layer("seccomp")?;
            let (reader, mut writer) = std::io::pipe().layer("seccomp")?;
            // The filter is a few KiB, far below a pipe's capacity, so this cannot block.
            writer.write_all(&bytes).layer("seccomp")?;
            drop(writer);
            Some(airlock_jail::fd::dup_to(reader.as_fd(), STAGING_FILTER_FD).layer("fds")?)
        }
        Mode::Command { .. } => None,
    };
    let code = match bootstrap_code(cfg) {
        Some(bytes) => {
            let (reader, mut writer) = std::io::pipe().layer("bootstrap")?;
            // The pipe is made to hold all of it first, so the write cannot block; a machine
            // that will not grow a pipe so far gets the source instead (`-c`), as before.
            match airlock_jail::fd::set_pipe_capacity(writer.as_fd(), bytes.len()) {
                Ok(cap) if cap >= bytes.len() => {
                    writer.write_all(&bytes).layer("bootstrap")?;
                    drop(writer);
                    Some(airlock_jail::fd::dup_to(reader.as_fd(), STAGING_CODE_FD).layer("fds")?)
                }
                _ => None,
            }
        }
        None => None,
    };
    let image = if cfg.restore_image {
        Some(fdpass::take_inherited(KERNEL_IMAGE_FD).layer("kernel image")?)
    } else {
        None
    };
    Ok(Staged {
        socket,
        filter,
        code,
        image,
    })
}

/// stdin (and a terminal's stdout and stderr). A run's stdin is /dev/null; a background
/// process leads a session of its own (so a signal to its group reaches all it started) and
/// reads its pipe, or has its terminal as controlling terminal and stdio.
fn set_up_stdio(cfg: &ExecutorConfig) -> Result<(), Refusal> {
    let stdio = match cfg.machine {
        Some(Joining::Process { stdio }) => stdio,
        _ => ProcessStdio::Null,
    };
    if let Some(Joining::Process { .. }) = cfg.machine {
        if stdio != ProcessStdio::Terminal {
            process::new_session().layer("session")?;
        }
    }
    match stdio {
        ProcessStdio::Null => {
            let devnull = std::fs::File::open("/dev/null").layer("stdin")?;
            process::dup2(devnull.as_raw_fd(), 0).layer("stdin")
        }
        ProcessStdio::Pipe => {
            let pipe = fdpass::take_inherited(PROCESS_STDIO_FD).layer("stdin")?;
            process::dup2(pipe.as_raw_fd(), 0).layer("stdin")
        }
        ProcessStdio::Terminal => {
            let tty = fdpass::take_inherited(PROCESS_STDIO_FD).layer("terminal")?;
            airlock_jail::pty::become_session_leader_with_tty(tty.as_fd()).layer("terminal")?;
            for to in 0..3 {
                process::dup2(tty.as_raw_fd(), to).layer("terminal")?;
            }
            Ok(())
        }
    }
}

/// The guest's inherited fds, held open until execve.
struct Placed {
    filter: Option<OwnedFd>,
    code: Option<OwnedFd>,
    image: Option<OwnedFd>,
}

fn place(staged: Staged) -> Result<(Channel, Placed), Refusal> {
    let socket = airlock_jail::fd::dup_to(staged.socket.as_fd(), GUEST_SOCKET_FD).layer("fds")?;
    let filter = match &staged.filter {
        Some(f) => Some(airlock_jail::fd::dup_to(f.as_fd(), GUEST_FILTER_FD).layer("fds")?),
        None => None,
    };
    let code = match &staged.code {
        Some(f) => Some(airlock_jail::fd::dup_to(f.as_fd(), GUEST_CODE_FD).layer("fds")?),
        None => None,
    };
    let image = staged.image;
    drop(staged.filter);
    drop(staged.code);
    drop(staged.socket);
    Ok((
        Channel::from_owned(socket),
        Placed {
            filter,
            code,
            image,
        },
    ))
}

/// rlimits, fds, Landlock, capabilities, no_new_privs.
fn lock_down(cfg: &ExecutorConfig, placed: &Placed) -> Result<(), Refusal> {
    let mut keep = vec![0, 1, 2, GUEST_SOCKET_FD];
    if placed.filter.is_some() {
        keep.push(GUEST_FILTER_FD);
    }
    if placed.code.is_some() {
        keep.push(GUEST_CODE_FD);
    }
    if placed.image.is_some() {
        keep.push(KERNEL_IMAGE_FD);
    }
    process::close_fds_except(&keep).layer("fds")?;
    rlimits::apply(&rlimits::Rlimits {
        address_space: cfg.rlimits.address_space,
        file_size: cfg.rlimits.file_size,
        open_files: cfg.rlimits.open_files,
        processes: cfg.rlimits.processes,
        cpu_seconds: None,
    })
    .layer("rlimits")?;
    let fs = landlock::FsPolicy {
        read_only: cfg.fs.read_only.clone(),
        read_exec: cfg.fs.read_exec.clone(),
        read_write: cfg.fs.read_write.clone(),
        data: cfg.fs.data.clone(),
    };
    if let Some(Joining::Process { .. }) = cfg.machine {
        // A background process: any port of the machine's own loopback, and signals to the
        // machine's other processes (its pid namespace is all it can name).
        landlock::restrict_in_machine(&fs).layer("landlock")?;
    } else if cfg.machine.is_some() {
        // A run in a machine: any port of the machine's own loopback.
        landlock::restrict_on_own_loopback(&fs).layer("landlock")?;
    } else {
        let connect_ports: Vec<u16> = cfg.egress_proxy_port.into_iter().collect();
        landlock::restrict_with_connect(&fs, &connect_ports).layer("landlock")?;
    }
    caps::drop_all().layer("capabilities")?;
    caps::set_no_new_privs().layer("no_new_privs")
}

/// Hand over to the workload. Returns only on failure.
fn start(
    guest: &mut Channel,
    cfg: &ExecutorConfig,
    placed: &Placed,
) -> Result<Infallible, Refusal> {
    // What execve hands the workload: default dispositions, nothing blocked.
    process::reset_signal_dispositions().layer("signals")?;
    let env = cstrings(cfg.env.iter().map(|(k, v)| format!("{k}={v}")))?;
    match &cfg.mode {
        Mode::Python { .. } if cfg.restore_image => {
            crate::stage_restore::restore_kernel(guest, cfg, placed.image.as_ref(), network(cfg))
        }
        Mode::Python { interpreter, .. } => {
            if cfg.untrusted_interpreter {
                // An image's interpreter runs before its bootstrap could install anything: the
                // exec filter (what a command in this sandbox gets) is in force first.
                seccomp::install_for(seccomp::Profile::Exec, network(cfg)).layer("seccomp")?;
            }
            let interp = path_str(interpreter)?;
            let program = if placed.code.is_some() {
                LOADER
            } else {
                BOOTSTRAP_PY
            };
            // -S: no `site` start-up (it can import arbitrary .pth code and costs more than the
            // rest of start-up); the discovered sys.path arrives with `execute` instead.
            let argv = cstrings([interp, "-I", "-B", "-S", "-c", program].map(str::to_string))?;
            Err(exec(interpreter, &argv, &env))
        }
        Mode::Command { program, argv } => {
            crate::attested_start::filter_attest_and_wait(
                guest,
                seccomp::Profile::Exec,
                network(cfg),
            )?;
            // The command itself gets no channel to the broker; refusals still can use it.
            process::set_cloexec(GUEST_SOCKET_FD, true).layer("fds")?;
            let argv = cstrings(argv.iter().cloned())?;
            Err(exec(program, &argv, &env))
        }
    }
}

/// The seccomp network allowance: TCP client sockets only in allowlist egress.
fn network(cfg: &ExecutorConfig) -> seccomp::Network {
    match (cfg.machine, cfg.egress_proxy_port) {
        (Some(_), _) => seccomp::Network::Loopback,
        (None, Some(_)) => seccomp::Network::ProxyClient,
        (None, None) => seccomp::Network::None,
    }
}

fn exec(program: &Path, argv: &[CString], env: &[CString]) -> Refusal {
    let path = match path_str(program).and_then(|p| cstring(p.to_string())) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let err = process::execve(&path, argv, env);
    Refusal {
        layer: "execve",
        message: format!("{}: {err}", program.display()),
    }
}

fn path_str(p: &Path) -> Result<&str, Refusal> {
    p.to_str().ok_or_else(|| Refusal {
        layer: "config",
        message: "non-UTF-8 path".into(),
    })
}

fn cstring(s: String) -> Result<CString, Refusal> {
    CString::new(s).layer("config")
}

fn cstrings(items: impl IntoIterator<Item = String>) -> Result<Vec<CString>, Refusal> {
    items.into_iter().map(cstring).collect()
}

#[cfg(test)]
mod tests {
    use super::decode_hex;

    #[test]
    fn hex_decodes_exactly_or_not_at_all() {
        assert_eq!(decode_hex("00ff7a"), Some(vec![0, 255, 0x7a]));
        assert_eq!(decode_hex("0"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex(""), Some(vec![]));
    }
}
