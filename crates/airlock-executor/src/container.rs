//! The setting to change when a step a container's defaults deny fails with `EPERM`.
//!
//! Inside podman or docker with their default settings, the sandbox's set-up fails at a few
//! known steps, each because of one container setting (docs/deploy.md, "Running airlock inside
//! a container", proven by `crates/airlock-cli/tests/container.rs`). The refusal names that
//! setting, so the operator learns what to change rather than an errno. Other errors pass
//! through unchanged.

use airlock_jail::JailError;

/// `EPERM` (the executor has no libc dependency; the value is the same on every Linux arch).
const EPERM: i32 = 1;

/// Creating the user namespace (docker's default seccomp profile denies `unshare`).
pub(crate) const USERNS: &str = "allow unprivileged user namespaces (see `airlock doctor`); in a \
     container, its seccomp profile must allow unshare, setns, mount, umount2, pivot_root and \
     sethostname without CAP_SYS_ADMIN (docker's default does not; docs/deploy.md has one that \
     does)";

/// A root broker cloning the system directories in its own mount namespace.
pub(crate) const CLONE_TREE: &str = "a root broker clones the sandbox's system directories in \
     its own mount namespace, which needs CAP_SYS_ADMIN there; in a container, run airlock as a \
     non-root user (recommended), or add --cap-add SYS_ADMIN (see docs/deploy.md)";

/// Mounting the run's own procfs (masked /proc paths forbid it in a user namespace).
pub(crate) const PROC_MOUNT: &str = "a user namespace may mount procfs only where no /proc path \
     is masked or over-mounted; in a container, start it with --security-opt unmask=/proc/* \
     (podman), --security-opt systempaths=unconfined (docker) or procMount: Unmasked \
     (Kubernetes), see docs/deploy.md";

/// `pivot_root` into the sandbox root (docker's default seccomp profile denies it).
pub(crate) const PIVOT_ROOT: &str = "the container's seccomp profile denies pivot_root (docker's \
     default does); use a profile that allows it (see docs/deploy.md)";

/// Naming the run's own uts namespace (the default profiles deny it without CAP_SYS_ADMIN).
pub(crate) const SETHOSTNAME: &str = "the container's seccomp profile denies sethostname \
     (podman's and docker's defaults do, unless the container has CAP_SYS_ADMIN); use one \
     that allows it, e.g. deploy/seccomp/airlock.json (see docs/deploy.md)";

/// `err`, with `fix` appended when it is `EPERM` (the errno a container's settings produce).
pub(crate) fn explain(fix: &'static str) -> impl FnOnce(JailError) -> String {
    move |err| {
        if err.errno() == Some(EPERM) {
            format!("{err} (fix: {fix})")
        } else {
            err.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys(errno: i32) -> JailError {
        JailError::Sys {
            op: "sethostname",
            source: std::io::Error::from_raw_os_error(errno),
        }
    }

    #[test]
    fn eperm_names_the_setting_and_other_errors_pass_through() {
        let with = explain(SETHOSTNAME)(sys(EPERM));
        assert!(with.starts_with("sethostname failed: "), "{with}");
        assert!(
            with.contains("fix: the container's seccomp profile"),
            "{with}"
        );
        let without = explain(SETHOSTNAME)(sys(22));
        assert!(!without.contains("fix:"), "{without}");
    }
}
