//! The guest's proof of its own state, sent as the `ready` notification before any code runs,
//! and the broker-side check of it.
//!
//! The proof comes from trusted code (the bootstrap or the stage) after every layer is applied
//! and before untrusted code exists, so a failed check means a layer silently did not hold: the
//! broker refuses to send code.
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;

use serde::{Deserialize, Serialize};

/// The namespaces a run must not share with the broker.
pub const ISOLATED_NAMESPACES: [&str; 6] = ["user", "net", "ipc", "uts", "mnt", "pid"];

/// Where a guest must be in its pid namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidRule<'a> {
    /// pid 1 of a namespace of its own (a run).
    One,
    /// A process of its sandbox's machine: in the pid namespace named (`pid:[inode]`).
    In(&'a str),
}

/// What the guest reports about itself (fields mirror `guest/bootstrap.py`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Attestation {
    /// `NoNewPrivs` from /proc/self/status.
    pub no_new_privs: bool,
    /// `Seccomp` from /proc/self/status (2 = filter).
    pub seccomp_mode: u32,
    /// `CapEff` bitmask.
    pub cap_eff: u64,
    /// `CapPrm` bitmask.
    pub cap_prm: u64,
    /// Contents of /proc/self/uid_map.
    pub uid_map: String,
    /// Interfaces of the guest's network namespace.
    pub interfaces: Vec<String>,
    /// `readlink /proc/self/ns/<name>` for each namespace.
    pub namespaces: BTreeMap<String, String>,
    /// The guest's pid inside its pid namespace.
    pub pid: i64,
    /// A forkable kernel's seccomp listener, as its fd number in the guest (the broker takes
    /// it before it sends anything; the guest then closes its own).
    #[serde(default)]
    pub listener: Option<i32>,
}

/// Read at most this much of a /proc file: the files read here are a few KiB.
const PROC_READ_CAP: u64 = 64 * 1024;

fn read_proc(path: &str) -> std::io::Result<String> {
    let mut out = String::new();
    fs::File::open(path)?
        .take(PROC_READ_CAP)
        .read_to_string(&mut out)?;
    Ok(out)
}

/// The namespace identities of the calling process.
pub fn own_namespaces() -> BTreeMap<String, String> {
    ISOLATED_NAMESPACES
        .iter()
        .chain(["cgroup"].iter())
        .map(|ns| {
            let link = fs::read_link(format!("/proc/self/ns/{ns}"))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            (ns.to_string(), link)
        })
        .collect()
}

impl Attestation {
    /// Collect the attestation of the calling process (used by the stage in exec mode).
    pub fn collect() -> std::io::Result<Self> {
        let status = read_proc("/proc/self/status")?;
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let hex = |key: &str| u64::from_str_radix(&field(key), 16).unwrap_or(u64::MAX);
        let dev = read_proc("/proc/net/dev")?;
        let mut interfaces: Vec<String> = dev
            .lines()
            .skip(2)
            .filter_map(|l| l.split_once(':').map(|(name, _)| name.trim().to_string()))
            .collect();
        interfaces.sort();
        Ok(Self {
            no_new_privs: field("NoNewPrivs") == "1",
            seccomp_mode: field("Seccomp").parse().unwrap_or(0),
            cap_eff: hex("CapEff"),
            cap_prm: hex("CapPrm"),
            uid_map: read_proc("/proc/self/uid_map")?.trim().to_string(),
            interfaces,
            namespaces: own_namespaces(),
            pid: i64::from(std::process::id()),
            listener: None,
        })
    }

    /// Check the attestation against the broker's own namespaces. Returns every problem found.
    pub fn verify(&self, broker_namespaces: &BTreeMap<String, String>) -> Result<(), Vec<String>> {
        self.verify_as(broker_namespaces, PidRule::One)
    }

    /// [`Attestation::verify`], the guest's place in its pid namespace checked by `rule`.
    pub fn verify_as(
        &self,
        broker_namespaces: &BTreeMap<String, String>,
        rule: PidRule<'_>,
    ) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if !self.no_new_privs {
            problems.push("no_new_privs is not set".to_string());
        }
        if self.seccomp_mode != 2 {
            problems.push(format!(
                "seccomp mode is {}, expected 2 (filter)",
                self.seccomp_mode
            ));
        }
        if self.cap_eff != 0 || self.cap_prm != 0 {
            problems.push(format!(
                "capabilities held: effective {:#x}, permitted {:#x}",
                self.cap_eff, self.cap_prm
            ));
        }
        if self.uid_map.lines().count() != 1 || !self.uid_map.trim().ends_with(" 1") {
            problems.push(format!("uid map is not a single entry: {:?}", self.uid_map));
        }
        if self.interfaces != ["lo"] {
            problems.push(format!(
                "network interfaces besides loopback: {:?}",
                self.interfaces
            ));
        }
        match rule {
            PidRule::One if self.pid != 1 => problems.push(format!(
                "guest is pid {} of its namespace, expected 1",
                self.pid
            )),
            PidRule::In(machine) => {
                let pid_ns = self.namespaces.get("pid").map_or("", String::as_str);
                if pid_ns != machine {
                    problems.push(format!(
                        "process is in pid namespace {pid_ns:?}, not its machine's {machine:?}"
                    ));
                }
            }
            PidRule::One => {}
        }
        for ns in ISOLATED_NAMESPACES {
            let guest = self.namespaces.get(ns).map(String::as_str).unwrap_or("");
            let host = broker_namespaces.get(ns).map(String::as_str).unwrap_or("");
            if guest.is_empty() || guest == host {
                problems.push(format!(
                    "{ns} namespace is shared with the broker ({guest:?})"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Attestation {
        let namespaces = ISOLATED_NAMESPACES
            .iter()
            .map(|ns| (ns.to_string(), format!("{ns}:[1]")))
            .collect();
        Attestation {
            no_new_privs: true,
            seccomp_mode: 2,
            cap_eff: 0,
            cap_prm: 0,
            uid_map: "1000 0 1".into(),
            interfaces: vec!["lo".into()],
            namespaces,
            pid: 1,
            listener: None,
        }
    }

    #[test]
    fn a_fully_isolated_guest_passes() {
        assert_eq!(good().verify(&own_namespaces()), Ok(()));
    }

    #[test]
    fn each_missing_layer_is_named() {
        let host = own_namespaces();
        let mut a = good();
        a.no_new_privs = false;
        a.seccomp_mode = 0;
        a.cap_eff = 1;
        a.interfaces.push("eth0".into());
        a.namespaces.insert("net".into(), host["net"].clone());
        let problems = a.verify(&host).unwrap_err();
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("net namespace")));
        assert!(problems.iter().any(|p| p.contains("eth0")));
    }

    #[test]
    fn the_host_process_itself_fails_verification() {
        let me = Attestation::collect().unwrap();
        assert!(me.verify(&own_namespaces()).is_err());
    }
}
