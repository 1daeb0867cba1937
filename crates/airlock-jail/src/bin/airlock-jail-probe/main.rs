//! `airlock-jail-probe`: a single-threaded test helper that applies one jail layer and then
//! tries the forbidden thing, reporting through its exit status (0 = the layer behaved as
//! required, 1 = it did not, 2 = usage/setup error; a kill shows as death by signal).
//!
//! `airlock-jail-probe [--as-uid N] SCENARIO [ARGS...]`; `--as-uid` (root only) drops to
//! uid/gid N with no supplementary groups first, so the non-root paths are tested without
//! needing a passwd entry.

mod chain;
mod fs_case;
mod nproc;
mod report;
mod sec;
mod sec_branch;
mod sec_handover;
mod sec_ipc;
mod sec_loopback;

use std::process::ExitCode;

fn drop_to(uid: u32) -> Result<(), String> {
    // SAFETY: plain credential syscalls on this single-threaded process.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(uid, uid, uid) != 0
            || libc::setresuid(uid, uid, uid) != 0
        {
            return Err(format!(
                "drop to uid {uid}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    // Changing uid without an execve makes the process non-dumpable, which makes its
    // /proc/self files root-owned (so uid_map could not be written). runuser would exec.
    airlock_jail::process::set_dumpable(true).map_err(|e| e.to_string())
}

fn run(args: &[String]) -> Result<bool, String> {
    let mut args = args;
    if args.first().map(String::as_str) == Some("--as-uid") {
        let uid: u32 = args
            .get(1)
            .and_then(|s| s.parse().ok())
            .ok_or("--as-uid N")?;
        drop_to(uid)?;
        args = &args[2..];
    }
    let (scenario, rest) = args.split_first().ok_or("missing scenario")?;
    match scenario.as_str() {
        "userns" => chain::userns(rest),
        "netns" => chain::netns(),
        "chain" => chain::full_chain(rest),
        "seccomp" => sec::run(rest),
        "seccomp-ipc" => sec_ipc::run(rest),
        "seccomp-branch" => sec_branch::run(rest),
        "seccomp-handover" => sec_handover::run(rest),
        "seccomp-loopback" => sec_loopback::run(rest),
        "landlock" => fs_case::landlock(rest),
        "nproc" => nproc::run(rest),
        "doctor" => {
            let reports = airlock_jail::doctor::check_all();
            for r in &reports {
                println!(
                    "{}\t{}\t{}\t{}",
                    r.layer,
                    r.available,
                    r.detail,
                    r.fix.as_deref().unwrap_or("-")
                );
            }
            Ok(true)
        }
        other => Err(format!("unknown scenario {other}")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("probe error: {e}");
            ExitCode::from(2)
        }
    }
}
