//! `airlock-bench`: the benchmark as its own binary (the same as `airlock bench`).
//!
//! Like `airlock`, its hidden `__executor` subcommand is the executor stage, dispatched before
//! anything else (no runtime, no threads), so the binary can serve as the pool's executor in
//! this crate's tests.
use std::process::ExitCode;

fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "__executor")
    {
        airlock_executor::stage_main();
    }
    let mut opts = airlock_bench::Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => opts.json = true,
            "--image" => match args.next() {
                Some(p) => opts.image = Some(p.into()),
                None => return usage(),
            },
            "--runs" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => opts.runs = n,
                None => return usage(),
            },
            _ => return usage(),
        }
    }
    match std::env::current_exe() {
        Ok(exe) => opts.executor = exe,
        Err(e) => {
            eprintln!("airlock-bench: locating this binary: {e}");
            return ExitCode::from(2);
        }
    }
    match airlock_bench::run_and_print(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("airlock-bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn usage() -> ExitCode {
    eprintln!("usage: airlock-bench [--runs N] [--json] [--image PATH]");
    ExitCode::from(2)
}
