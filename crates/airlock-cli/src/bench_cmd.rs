//! `airlock bench`: measure airlock (cold, warm, the CLI process) against the sandboxes a user
//! would pick instead, in one run on this machine, and print one table.
use std::process::ExitCode;

use anyhow::Context;

/// Options of `airlock bench`.
#[derive(Debug, clap::Args)]
pub struct BenchOpts {
    /// Samples per latency scenario (the default keeps the whole bench well under 2 minutes).
    #[arg(long, default_value_t = 30)]
    pub runs: usize,
    /// Print the report as JSON instead of the markdown table.
    #[arg(long)]
    pub json: bool,
    /// Also measure a cold start on this image's root, and importing it (an OCI or Docker
    /// archive, a root tarball or a root directory; imported into a temporary store).
    #[arg(long, value_name = "PATH", conflicts_with = "from_json")]
    pub image: Option<std::path::PathBuf>,
    /// Measure nothing: print the markdown table of a report saved with `--json`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "runs"])]
    pub from_json: Option<std::path::PathBuf>,
}

pub fn bench(opts: BenchOpts) -> anyhow::Result<ExitCode> {
    if let Some(path) = &opts.from_json {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let report: airlock_bench::Report = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a bench report", path.display()))?;
        println!("{}", report.markdown());
        return Ok(ExitCode::SUCCESS);
    }
    let exe = std::env::current_exe().context("locating the airlock binary")?;
    let options = airlock_bench::Options {
        runs: opts.runs,
        json: opts.json,
        executor: exe.clone(),
        cli: Some(exe),
        image: opts.image,
    };
    airlock_bench::run_and_print(&options)?;
    Ok(ExitCode::SUCCESS)
}
