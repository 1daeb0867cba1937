//! `doctor`: which isolation layers this machine offers, each established by actually doing
//! it in a forked child, and for each missing one, why (the errno) and how to fix it.

mod checks;
mod child;

use std::path::Path;

use child::Outcome;

use crate::sys::read_bounded;

/// One layer's verdict.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LayerReport {
    /// `userns`, `netns`, `pidns`, `utsns`, `mountns`, `seccomp`, `landlock`, `cgroup_v1_memory`,
    /// `cgroup_v1_pids`, `cgroup_v1_cpu`, `cgroup_v2_kill` or `kvm` (and `sandbox_root`, which
    /// `airlock doctor` adds by assembling a real sandbox root).
    pub layer: String,
    /// Whether the layer works for the current user.
    pub available: bool,
    /// What was tried and what happened.
    pub detail: String,
    /// How to make it available, when it is not.
    pub fix: Option<String>,
}

/// Every layer name [`check_all`] reports, in order.
pub const LAYERS: &[&str] = &[
    "userns",
    "netns",
    "pidns",
    "utsns",
    "mountns",
    "seccomp",
    "landlock",
    "cgroup_v1_memory",
    "cgroup_v1_pids",
    "cgroup_v1_cpu",
    "cgroup_v2_kill",
    "kvm",
];

/// The layers of [`LAYERS`] every run needs: without one of them a run is `refused` (the
/// others strengthen or speed up runs where present). `airlock doctor` adds `sandbox_root`;
/// `airlock serve`'s `/readyz` re-probes these.
pub const REQUIRED: &[&str] = &[
    "userns", "netns", "pidns", "utsns", "mountns", "seccomp", "landlock",
];

fn sysctl(path: &str) -> Option<String> {
    read_bounded(Path::new(path), 64)
        .ok()
        .map(|s| s.trim().to_string())
}

fn userns_fix() -> String {
    let mut fixes = Vec::new();
    if sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        fixes.push("sysctl -w kernel.unprivileged_userns_clone=1");
    }
    if sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        fixes.push("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0");
    }
    if sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        fixes.push("sysctl -w user.max_user_namespaces=15000");
    }
    if fixes.is_empty() {
        "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 \
         (Debian), sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu >= 23.10), \
         sysctl -w user.max_user_namespaces=15000; in a container, allow unshare/clone in its \
         seccomp profile"
            .into()
    } else {
        fixes.join(" and ")
    }
}

fn report(
    layer: &str,
    steps: &[&str],
    outcome: Outcome,
    fix: impl FnOnce() -> String,
) -> LayerReport {
    let (available, detail) = match outcome {
        Outcome::Ok => (true, format!("ok: {}", steps.join(", "))),
        Outcome::Failed(f) => {
            let name = usize::try_from(f.step)
                .ok()
                .and_then(|i| steps.get(i))
                .unwrap_or(&"?");
            let why = if f.errno == 0 {
                "unexpected result".to_string()
            } else {
                std::io::Error::from_raw_os_error(f.errno).to_string()
            };
            (false, format!("failed at {name}: {why}"))
        }
        Outcome::Died(sig) if sig > 0 => (false, format!("probe killed by signal {sig}")),
        Outcome::Died(e) if e < 0 => (
            false,
            format!(
                "could not start the probe: {}",
                std::io::Error::from_raw_os_error(-e)
            ),
        ),
        Outcome::Died(_) => (false, "probe exited without a report".into()),
    };
    LayerReport {
        layer: layer.into(),
        available,
        fix: (!available).then(fix),
        detail,
    }
}

fn landlock_report() -> LayerReport {
    let abi = crate::landlock::abi_version();
    let outcome = child::run(checks::landlock);
    let mut r = report("landlock", checks::LANDLOCK_STEPS, outcome, || {
        "boot a kernel >= 5.13 built with CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= \
         boot parameter (e.g. lsm=landlock,lockdown,yama,integrity,apparmor)"
            .into()
    });
    if let Some(abi) = abi {
        r.detail = format!(
            "abi {abi} (tcp restriction: {}, scoping: {}); {}",
            if abi >= 4 {
                "yes"
            } else {
                "no, needs abi 4 / linux 6.7"
            },
            if abi >= 6 {
                "yes"
            } else {
                "no, needs abi 6 / linux 6.12"
            },
            r.detail
        );
    }
    r
}

fn seccomp_report() -> LayerReport {
    let fix = || "use a kernel with CONFIG_SECCOMP_FILTER=y on x86_64".to_string();
    let filter = match crate::seccomp::compile(crate::seccomp::Profile::Run) {
        Ok(bytes) => bytes
            .chunks_exact(8)
            .map(|c| libc::sock_filter {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect::<Vec<_>>(),
        Err(e) => {
            return LayerReport {
                layer: "seccomp".into(),
                available: false,
                detail: e.to_string(),
                fix: Some(fix()),
            }
        }
    };
    let mut filter = filter;
    let outcome = child::run(|r| checks::seccomp(r, &mut filter));
    report("seccomp", checks::SECCOMP_STEPS, outcome, fix)
}

fn cgroup_reports() -> Vec<LayerReport> {
    let s = crate::cgroup::support();
    let fix = s.fix.clone();
    [
        ("cgroup_v1_memory", s.v1_memory, "memory:"),
        ("cgroup_v1_pids", s.v1_pids, "pids:"),
        ("cgroup_v1_cpu", s.v1_cpu, "cpu:"),
        ("cgroup_v2_kill", s.v2_kill, "cgroup2:"),
    ]
    .into_iter()
    .map(|(layer, available, prefix)| LayerReport {
        layer: layer.into(),
        available,
        detail: s
            .detail
            .split("; ")
            .find(|d| d.starts_with(prefix))
            .unwrap_or("not probed")
            .to_string(),
        fix: if available { None } else { fix.clone() },
    })
    .collect()
}

fn kvm_report() -> LayerReport {
    const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
    let fix = Some(
        "enable virtualization in firmware (or nested virtualization for a VM), load kvm_intel \
         or kvm_amd, and give the user access to /dev/kvm (the kvm group)"
            .to_string(),
    );
    let path = b"/dev/kvm\0";
    // SAFETY: open with a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd == -1 {
        let e = std::io::Error::last_os_error();
        return LayerReport {
            layer: "kvm".into(),
            available: false,
            detail: format!("open /dev/kvm: {e}"),
            fix,
        };
    }
    // SAFETY: KVM_GET_API_VERSION takes no argument; fd is ours.
    let v = unsafe { libc::ioctl(fd, KVM_GET_API_VERSION, 0) };
    // SAFETY: closes the fd we opened.
    unsafe { libc::close(fd) };
    LayerReport {
        layer: "kvm".into(),
        available: v == 12,
        detail: format!("KVM_GET_API_VERSION = {v}"),
        fix: if v == 12 { None } else { fix },
    }
}

/// Runs every check. Safe to call from a multi-threaded process (the probes are forked
/// children that run async-signal-safe code only).
pub fn check_all() -> Vec<LayerReport> {
    let maps = checks::Maps::new();
    let mut out = vec![
        report(
            "userns",
            checks::USERNS_STEPS,
            child::run(|r| checks::userns(r, &maps)),
            userns_fix,
        ),
        report(
            "netns",
            checks::NETNS_STEPS,
            child::run(checks::netns),
            userns_fix,
        ),
        report(
            "pidns",
            checks::PIDNS_STEPS,
            child::run(checks::pidns),
            userns_fix,
        ),
        report(
            "utsns",
            checks::UTSNS_STEPS,
            child::run(checks::utsns),
            || {
                "naming the run's own uts namespace needs sethostname(2): in a container, a \
                 seccomp profile that allows it without CAP_SYS_ADMIN (podman's and docker's \
                 defaults do not; deploy/seccomp/airlock.json does); also see the userns fix"
                    .into()
            },
        ),
        report(
            "mountns",
            checks::MOUNTNS_STEPS,
            child::run(checks::mountns),
            || {
                "mounting procfs in a user namespace needs a fully visible /proc in the mount \
             namespace (no masked or over-mounted /proc paths, as container runtimes add): run \
             on the host, or in a container started with --security-opt unmask=/proc/* \
             (podman), systempaths=unconfined (docker) or procMount: Unmasked (Kubernetes) \
             (docs/deploy.md); also see the userns fix"
                    .into()
            },
        ),
        seccomp_report(),
        landlock_report(),
    ];
    out.extend(cgroup_reports());
    out.push(kvm_report());
    out
}
