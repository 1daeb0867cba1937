//! The egress suite: the mode a backend declares is the mode it enforces.

use super::report::{check, ConformanceReport};
use crate::sandbox::{ExecOptions, RunOptions, Sandbox};

/// How the suite fetches a URL inside the guest; success is exit code zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    /// `curl -fsS --max-time 10 URL`.
    Curl,
    /// A Python program built from the template, with `{url}` replaced.
    Python(String),
}

/// What the suite needs: the sandbox was acquired under an allowlist naming `allowed_url`'s
/// host and not `denied_url`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressProbe {
    /// A URL on the allowlist.
    pub allowed_url: String,
    /// A URL off it.
    pub denied_url: String,
    /// How to fetch.
    pub fetch: Fetch,
}

async fn reaches(sandbox: &dyn Sandbox, fetch: &Fetch, url: &str) -> Result<bool, String> {
    match fetch {
        Fetch::Curl => {
            let argv: Vec<String> = ["curl", "-fsS", "--max-time", "10", url]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            let o = sandbox
                .exec(&argv, &ExecOptions::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok(o.exit_code == Some(0))
        }
        Fetch::Python(template) => {
            let code = template.replace("{url}", url);
            let o = sandbox
                .run_code(&code, &RunOptions::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok(o.exit_code == Some(0))
        }
    }
}

/// Asserts the outcome every allowlist backend shares: the allowed host answers, the denied
/// host does not. Give it a sandbox acquired with `Egress::Allowlist` and that allowlist.
pub async fn egress_suite(sandbox: &dyn Sandbox, probe: &EgressProbe) -> ConformanceReport {
    let mut r = ConformanceReport::new("egress");
    let allowed = reaches(sandbox, &probe.fetch, &probe.allowed_url).await;
    r.record(
        "allowed_host_answers",
        "an allowlist that blocks its own hosts hands the workload a posture it was not built for",
        allowed.and_then(|ok| check(ok, || format!("{} was not reachable", probe.allowed_url))),
    );
    let denied = reaches(sandbox, &probe.fetch, &probe.denied_url).await;
    r.record(
        "denied_host_blocked",
        "everything not named is denied; a leak silently widens what the workload reaches",
        denied.and_then(|ok| check(!ok, || format!("{} was reachable", probe.denied_url))),
    );
    r
}
