//! `--policy FILE` (or `AIRLOCK_POLICY`): the host's policy.toml applied to a CLI run or a
//! server, through the same decision the router makes for the local backend.
//!
//! Its `[limits]` are both the defaults and the ceilings: a flag above a ceiling is refused with
//! the key that set it, never clamped. Its floor, denied capabilities and scope floor are checked
//! against what the local sandbox declares *on this machine* (container only where namespaces and
//! cgroup limits both hold, else os_process), before anything is spawned. Without a policy file
//! the invoking user is the host and no gate applies beyond the sandbox's own layers.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_broker::Workload;
use airlock_local::backend::local_declarations;
use airlock_policy::{
    decide, BackendProfile, Capability, Egress, Policy, RunLimits, SandboxSpec, TransferLimits,
    MAX_POLICY_BYTES,
};
use anyhow::{bail, Context};

/// The policy in force, if any.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    policy: Option<Policy>,
}

/// Limits a run uses after flags, policy defaults and ceilings are resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Memory ceiling in MiB.
    pub memory_mb: u64,
    /// Tool calls per run.
    pub max_tool_calls: u32,
    /// Captured bytes per stream.
    pub max_output: usize,
    /// The sandbox's writable filesystem, in MiB.
    pub disk_mb: u64,
}

/// Flags as given (None = not given).
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    pub timeout: Option<f64>,
    pub memory_mb: Option<u64>,
    pub max_tool_calls: Option<u32>,
    pub max_output: Option<usize>,
    pub disk_mb: Option<u64>,
}

/// What a run gets when neither a flag nor the policy says: the one table.
const DEFAULTS: RunLimits = RunLimits::DEFAULT;

impl Gate {
    /// Load `path`, else `$AIRLOCK_POLICY`, else no policy.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Gate> {
        let path: Option<PathBuf> = path
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("AIRLOCK_POLICY").map(PathBuf::from));
        let Some(path) = path else {
            return Ok(Gate::default());
        };
        let mut text = String::new();
        std::fs::File::open(&path)
            .with_context(|| format!("opening policy {}", path.display()))?
            .take(MAX_POLICY_BYTES as u64 + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("reading policy {}", path.display()))?;
        let policy =
            Policy::from_toml_str(&text).with_context(|| format!("policy {}", path.display()))?;
        Ok(Gate {
            policy: Some(policy),
        })
    }

    /// The policy, if one is in force.
    pub fn policy(&self) -> Option<&Policy> {
        self.policy.as_ref()
    }

    /// Resolve flags against the policy's limits (defaults and ceilings).
    pub fn resolve(&self, asked: Asked) -> anyhow::Result<Resolved> {
        let limits = self.policy.as_ref().map(|p| &p.limits);
        let timeout = pick(
            asked.timeout,
            limits.map(|l| l.timeout_seconds as f64),
            DEFAULTS.timeout_seconds as f64,
            "--timeout",
            "limits.timeout_seconds",
        )?;
        if !(timeout.is_finite() && timeout > 0.0 && timeout <= 86_400.0) {
            bail!("--timeout must be a number of seconds in (0, 86400], got {timeout}");
        }
        let memory_mb = pick(
            asked.memory_mb,
            limits.map(|l| l.memory_mb),
            DEFAULTS.memory_mb,
            "--memory",
            "limits.memory_mb",
        )?;
        if memory_mb == 0 || memory_mb > 1024 * 1024 {
            bail!("--memory must be between 1 and 1048576 MiB, got {memory_mb}");
        }
        let max_tool_calls = pick(
            asked.max_tool_calls.map(u64::from),
            limits.map(|l| l.max_tool_calls),
            DEFAULTS.max_tool_calls,
            "--max-tool-calls",
            "limits.max_tool_calls",
        )?;
        let max_output = pick(
            asked.max_output.map(|v| v as u64),
            limits.map(|l| l.max_output_bytes),
            DEFAULTS.max_output_bytes,
            "--max-output",
            "limits.max_output_bytes",
        )?;
        let disk_mb = pick(
            asked.disk_mb,
            limits.map(|l| l.disk_mb),
            DEFAULTS.disk_mb,
            "--disk",
            "limits.disk_mb",
        )?;
        if disk_mb == 0 || disk_mb > 1024 * 1024 {
            bail!("--disk must be between 1 and 1048576 MiB, got {disk_mb}");
        }
        Ok(Resolved {
            timeout: Duration::from_secs_f64(timeout),
            memory_mb,
            disk_mb,
            max_tool_calls: u32::try_from(max_tool_calls).unwrap_or(u32::MAX),
            max_output: usize::try_from(max_output).unwrap_or(usize::MAX),
        })
    }

    /// Would the policy let the local sandbox serve a workload needing `needs` with `egress`?
    /// `Err` carries the refusal, naming the check and the fix.
    /// The `files_in` and `files_out` limits a run gets: the defaults lowered to the policy's
    /// ceilings.
    pub fn transfer_limits(&self) -> (TransferLimits, TransferLimits) {
        let host = self.policy.as_ref().map(|p| &p.host);
        (
            TransferLimits::DEFAULT.within(host.and_then(|h| h.files_in_ceiling.as_ref())),
            TransferLimits::DEFAULT.within(host.and_then(|h| h.files_out_ceiling.as_ref())),
        )
    }

    pub fn admit(
        &self,
        needs: &[Capability],
        egress: Egress,
        hosts: &[String],
    ) -> Result<(), String> {
        let Some(policy) = &self.policy else {
            return Ok(());
        };
        // A CLI or serve run names no transfer limits of its own: it asks for the defaults
        // lowered to the host's ceilings, never for more than the policy allows.
        let mut spec = SandboxSpec::builder("airlock-cli")
            .requires(needs.iter().copied())
            .egress(egress)
            .files_in(self.transfer_limits().0)
            .files_out(self.transfer_limits().1);
        if egress == Egress::Allowlist {
            spec = spec.egress_allow(hosts.iter().cloned());
        }
        let spec = spec.build().map_err(|e| format!("workload: {e}"))?;
        let probe = airlock_local::probe_rung();
        let declarations = local_declarations();
        let backend = BackendProfile {
            name: "local",
            isolation: probe.isolation,
            declarations: &declarations,
        };
        decide(&policy.host, backend, &spec)
            .map(|_| ())
            .map_err(|refusal| {
                format!(
                    "refused by policy: {refusal} (this machine's local sandbox: {})",
                    probe.detail
                )
            })
    }
}

/// What a workload needs of the sandbox, in the policy layer's vocabulary.
pub fn needs(workload: &Workload, uses_tools: bool) -> Vec<Capability> {
    let mut needs = vec![match workload {
        Workload::Python { .. } => Capability::RunCode,
        Workload::Command { .. } => Capability::Exec,
    }];
    if uses_tools {
        needs.push(Capability::HostTools);
    }
    needs
}

/// The flag if given (refused above the policy's ceiling), else the policy's value, else the
/// built-in default.
fn pick<T: PartialOrd + Copy + std::fmt::Display>(
    asked: Option<T>,
    ceiling: Option<T>,
    default: T,
    flag: &str,
    key: &str,
) -> anyhow::Result<T> {
    match (asked, ceiling) {
        (Some(v), Some(c)) if v > c => bail!("{flag} {v} exceeds the policy's {key} = {c}"),
        (Some(v), _) => Ok(v),
        (None, Some(c)) => Ok(c),
        (None, None) => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(toml: &str) -> Gate {
        Gate {
            policy: Some(Policy::from_toml_str(toml).unwrap()),
        }
    }

    #[test]
    fn policy_limits_are_defaults_and_ceilings() {
        let g = gate("floor = \"none\"\n[limits]\ntimeout_seconds = 10\nmemory_mb = 256\n");
        let r = g.resolve(Asked::default()).unwrap();
        assert_eq!(r.timeout, Duration::from_secs(10));
        assert_eq!(r.memory_mb, 256);
        let r = g
            .resolve(Asked {
                timeout: Some(2.0),
                ..Asked::default()
            })
            .unwrap();
        assert_eq!(r.timeout, Duration::from_secs(2));
        let err = g
            .resolve(Asked {
                memory_mb: Some(1024),
                ..Asked::default()
            })
            .unwrap_err();
        assert!(err.to_string().contains("limits.memory_mb = 256"), "{err}");
    }

    #[test]
    fn no_policy_means_builtin_defaults() {
        let r = Gate::default().resolve(Asked::default()).unwrap();
        assert_eq!(r.timeout, Duration::from_secs(30));
        assert_eq!(u64::from(r.max_tool_calls), DEFAULTS.max_tool_calls);
        assert!(Gate::default()
            .admit(&[Capability::RunCode], Egress::Closed, &[])
            .is_ok());
    }

    #[test]
    fn the_default_floor_refuses_the_local_sandbox() {
        // No floor in the file means the production floor, microvm: a shared-kernel sandbox
        // must be opted into explicitly.
        let err = gate("")
            .admit(&[Capability::RunCode], Egress::Closed, &[])
            .unwrap_err();
        assert!(err.contains("refused by policy"), "{err}");
    }

    #[test]
    fn denied_capabilities_refuse_before_anything_runs() {
        let g = gate("floor = \"os_process\"\ndenied_capabilities = [\"host_tools\"]\n");
        assert!(g.admit(&[Capability::RunCode], Egress::Closed, &[]).is_ok());
        let err = g
            .admit(
                &[Capability::RunCode, Capability::HostTools],
                Egress::Closed,
                &[],
            )
            .unwrap_err();
        assert!(err.contains("host_tools"), "{err}");
    }
}
