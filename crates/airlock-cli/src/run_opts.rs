//! The options `airlock run` and `airlock exec` share.
use std::path::PathBuf;

use clap::Args;

/// Options shared by `run` and `exec`.
#[derive(Debug, Args)]
pub struct RunOpts {
    /// Wall-clock limit in seconds [default: 30, or the policy's limits.timeout_seconds].
    #[arg(long, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// Memory limit in MiB [default: 512, or the policy's limits.memory_mb].
    #[arg(long, allow_negative_numbers = true)]
    pub memory: Option<u64>,
    /// The sandbox's disk in MiB: /work, /tmp and /dev/shm together, a kernel bound
    /// [default: 1024, or the policy's limits.disk_mb].
    #[arg(long, allow_negative_numbers = true)]
    pub disk: Option<u64>,
    /// Set an environment variable in the sandbox (repeatable); nothing else is inherited.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Offer a tool: NAME=CMD runs `sh -c CMD` on the host with JSON args on stdin (repeatable).
    #[arg(long = "tool", value_name = "NAME=CMD")]
    pub tools: Vec<String>,
    /// Copy a host file into the sandbox's /work before the run (repeatable; GUEST is relative
    /// to /work or starts with /work/, parents are created, links are never followed).
    #[arg(long = "put", value_name = "LOCAL=GUEST")]
    pub put: Vec<String>,
    /// Collect a work-dir file after the run (repeatable; GUEST as for --put; LOCAL must not
    /// exist yet).
    #[arg(long = "get", value_name = "GUEST=LOCAL")]
    pub get: Vec<String>,
    /// Maximum tool calls per run [default: 128, or the policy's limits.max_tool_calls].
    #[arg(long, allow_negative_numbers = true)]
    pub max_tool_calls: Option<u32>,
    /// Captured bytes kept per output stream [default: 65536, or the policy's
    /// limits.max_output_bytes].
    #[arg(long, allow_negative_numbers = true)]
    pub max_output: Option<usize>,
    /// A policy.toml (floor, denied capabilities, limits) to hold this run to; also read from
    /// $AIRLOCK_POLICY. Its limits are defaults and ceilings; a run it does not admit is refused.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// CPU quota in cores (e.g. 0.5); needs a usable cpu cgroup, else the run is refused.
    #[arg(long, allow_negative_numbers = true)]
    pub cpus: Option<f64>,
    /// Allowlist egress: let the program reach HOST[:PORT] through the broker's proxy
    /// (repeatable). `*.example.org` matches names below it, not the apex; no port means 80
    /// and 443. Without any, the sandbox has no network at all.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    pub allow_hosts: Vec<String>,
    /// Never let the program reach HOST[:PORT] (repeatable; deny wins over allow).
    #[arg(long = "deny-host", value_name = "HOST[:PORT]")]
    pub deny_hosts: Vec<String>,
    /// Let allowed hosts resolve into this private/loopback/link-local range (repeatable;
    /// such addresses are refused otherwise).
    #[arg(long = "allow-private", value_name = "CIDR")]
    pub allow_private: Vec<String>,
    /// Run on this image's root (see `airlock image`) instead of the host's system
    /// directories; the interpreter and commands are looked for inside it.
    #[arg(long, value_name = "NAME")]
    pub image: Option<String>,
    /// The image store [default: $AIRLOCK_IMAGE_DIR, /var/lib/airlock/images as root, else
    /// ~/.local/share/airlock/images].
    #[arg(long, value_name = "DIR")]
    pub image_dir: Option<PathBuf>,
    /// Print exactly one JSON object describing the run.
    #[arg(long)]
    pub json: bool,
    /// Fork the run from a zygote started for it — the path `airlock serve` and `airlock mcp`
    /// take by default — instead of exec-ing the interpreter. Slower for one run (the zygote
    /// starts first); it exists so both paths can be held to the same suites. A run the
    /// zygote cannot serve (a command, an image's interpreter) is exec'd as without it.
    #[arg(long)]
    pub zygote: bool,
}
