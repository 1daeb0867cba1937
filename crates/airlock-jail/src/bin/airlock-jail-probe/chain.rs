//! Namespace scenarios: `userns UID GID`, `netns`, and `chain SCRIPT`, which runs the executor
//! stage's exact sequence and then `/bin/sh -c SCRIPT` under the Exec profile.

use std::ffi::CString;
use std::path::PathBuf;

use airlock_jail::ns::{self, Namespaces};
use airlock_jail::process::{self, Fork};
use airlock_jail::{caps, landlock, net, rlimits, seccomp, userns};

use crate::report::check;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

pub(crate) fn userns(args: &[String]) -> Result<bool, String> {
    let [uid, gid] = args else {
        return Err("userns UID GID".into());
    };
    let uid: u32 = uid.parse().map_err(s)?;
    let gid: u32 = gid.parse().map_err(s)?;
    // SAFETY: geteuid cannot fail.
    let outer = unsafe { libc::geteuid() };
    userns::enter_user_namespace(uid, gid).map_err(s)?;
    // SAFETY: getuid/getgid cannot fail.
    let (u, g) = unsafe { (libc::getuid(), libc::getgid()) };
    let map = std::fs::read_to_string("/proc/self/uid_map").map_err(s)?;
    let fields: Vec<&str> = map.split_whitespace().collect();
    let setgroups = std::fs::read_to_string("/proc/self/setgroups").map_err(s)?;
    let a = check(&format!("getuid() = {u} (want {uid})"), u == uid);
    let b = check(&format!("getgid() = {g} (want {gid})"), g == gid);
    let want = [uid.to_string(), outer.to_string(), "1".to_string()];
    let c = check(
        &format!("uid_map {fields:?} is exactly one entry"),
        fields == want,
    );
    let d = check(
        &format!("setgroups = {setgroups:?}"),
        setgroups.trim() == "deny",
    );
    Ok(a && b && c && d)
}

pub(crate) fn netns() -> Result<bool, String> {
    userns::enter_user_namespace(1000, 1000).map_err(s)?;
    ns::unshare(Namespaces {
        net: true,
        ..Namespaces::default()
    })
    .map_err(s)?;
    let before = net::loopback_is_up().map_err(s)?;
    net::loopback_up().map_err(s)?;
    let names = net::interface_names().map_err(s)?;
    let up = net::loopback_is_up().map_err(s)?;
    let a = check(
        &format!("interfaces {names:?} are exactly [lo]"),
        names == ["lo"],
    );
    let b = check(
        &format!("lo down before ({before}), up after ({up})"),
        !before && up,
    );
    Ok(a && b)
}

/// What the jailed shell may touch.
fn policy(work: Option<PathBuf>) -> landlock::FsPolicy {
    landlock::FsPolicy {
        read_only: vec!["/proc".into(), "/etc".into()],
        read_exec: ["/bin", "/usr", "/lib", "/lib64", "/sbin"]
            .iter()
            .map(PathBuf::from)
            .collect(),
        read_write: std::iter::once(PathBuf::from("/dev/null"))
            .chain(work)
            .collect(),
        data: Vec::new(),
    }
}

/// The executor stage's sequence, then `sh -c SCRIPT` (its status becomes ours).
pub(crate) fn full_chain(args: &[String]) -> Result<bool, String> {
    let (script, rest) = args.split_first().ok_or("chain SCRIPT [WORKDIR]")?;
    let work = rest.first().map(PathBuf::from);
    // An fd without FD_CLOEXEC that only close_fds_except can keep from the jailed command.
    process::dup2(1, 9).map_err(s)?;
    userns::enter_user_namespace(1000, 1000).map_err(s)?;
    ns::unshare(Namespaces::all()).map_err(s)?;
    match process::fork().map_err(s)? {
        Fork::Parent { child } => {
            process::set_parent_death_signal_kill().map_err(s)?;
            process::forward_termination_signals(child).map_err(s)?;
            println!("child {child}");
            use std::io::Write;
            let _ = std::io::stdout().flush();
            let status = process::wait_child(child).map_err(s)?;
            process::exit_like(status)
        }
        Fork::Child => {
            let err = jailed_child(script, work);
            eprintln!("jail setup failed: {err}");
            process::exit_like(process::WaitStatus::Exited(2))
        }
    }
}

fn jailed_child(script: &str, work: Option<PathBuf>) -> String {
    let steps = || -> Result<(CString, Vec<CString>), String> {
        process::set_parent_death_signal_kill().map_err(s)?;
        ns::make_mounts_private().map_err(s)?;
        ns::mount_proc().map_err(s)?;
        ns::set_hostname("airlock").map_err(s)?;
        net::loopback_up().map_err(s)?;
        rlimits::apply(&rlimits::Rlimits {
            open_files: Some(256),
            file_size: Some(1 << 20),
            ..Default::default()
        })
        .map_err(s)?;
        process::close_fds_except(&[0, 1, 2]).map_err(s)?;
        let report = landlock::restrict(&policy(work)).map_err(s)?;
        if !report.network_restricted || !report.scoped {
            return Err(format!("landlock report {report:?}"));
        }
        caps::drop_all().map_err(s)?;
        caps::set_no_new_privs().map_err(s)?;
        seccomp::install(seccomp::Profile::Exec).map_err(s)?;
        let sh = CString::new("/bin/sh").map_err(s)?;
        let argv = vec![
            sh.clone(),
            CString::new("-c").map_err(s)?,
            CString::new(script).map_err(s)?,
        ];
        Ok((sh, argv))
    };
    match steps() {
        Ok((sh, argv)) => {
            let env = [CString::from(c"PATH=/usr/bin:/bin")];
            process::execve(&sh, &argv, &env).to_string()
        }
        Err(e) => e,
    }
}
