//! The `airlock` command line.
//!
//! `airlock __executor` is the hidden entry of the executor stage: it is dispatched before
//! anything else (no runtime, no threads), because unsharing a user namespace needs a
//! single-threaded process.
mod bench_cmd;
mod cli;
mod doctor;
mod image_build;
mod image_cmd;
mod logs;
mod mcp_cmd;
mod otlp;
mod policy_gate;
mod run_cmd;
mod run_opts;
mod serve_cmd;
mod serve_sandboxes;
mod state_choice;
mod sweep;
mod token_cmd;
mod usage;
mod zygote_choice;

fn main() -> std::process::ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "__executor")
    {
        airlock_executor::stage_main();
    }
    match cli::main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("airlock: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
