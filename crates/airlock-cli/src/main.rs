//! The `airlock` command line.
use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "airlock", version, about = "Run untrusted code in a rootless sandbox")]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
