//! What `run` and `exec` say when the request itself is wrong (a usage error), and about
//! input they do not pass on. With `--json` a usage error is one JSON object on stdout too:
//! a run result with `status: "error"` and an `invalid_params` error, exit code 2.
use std::io::{IsTerminal, Read};
use std::os::unix::fs::FileTypeExt;
use std::process::ExitCode;

use airlock_broker::RunResult;
use airlock_protocol::ErrorCode;

/// The exit code of a usage error (clap's).
pub const USAGE_EXIT: u8 = 2;

/// True when the command line is `run`/`exec` with `--json` among its options (before `--`).
pub fn json_requested() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    matches!(args.first().map(String::as_str), Some("run" | "exec"))
        && args
            .iter()
            .take_while(|a| *a != "--")
            .any(|a| a == "--json")
}

/// Prints the usage error as a run result (JSON) and returns the exit code.
pub fn usage_error(message: &str) -> ExitCode {
    let result = RunResult::not_started(ErrorCode::InvalidParams, message);
    match serde_json::to_string(&result) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("airlock: {e}"),
    }
    ExitCode::from(USAGE_EXIT)
}

/// `outcome`, with an error turned into a JSON usage error when `--json` was given.
pub fn or_usage_error(json: bool, outcome: anyhow::Result<ExitCode>) -> anyhow::Result<ExitCode> {
    match outcome {
        Err(e) if json => Ok(usage_error(&format!("{e:#}"))),
        other => other,
    }
}

/// The sandbox's stdin is /dev/null. Says so on stderr when something is piped into airlock
/// (data in a pipe or socket, or a non-empty file), which would otherwise vanish without a word.
/// A pipe is watched from a thread (its first byte, whenever it comes), so an open pipe that
/// never carries anything neither delays the run nor draws the note.
pub fn note_dropped_stdin() {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return;
    }
    let Ok(fd) = std::os::fd::AsFd::as_fd(&stdin).try_clone_to_owned() else {
        return;
    };
    let file = std::fs::File::from(fd);
    let Ok(meta) = file.metadata() else {
        return;
    };
    let kind = meta.file_type();
    if meta.is_file() && meta.len() > 0 {
        say_dropped();
    } else if kind.is_fifo() || kind.is_socket() {
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            if matches!((&file).read(&mut byte), Ok(1)) {
                say_dropped();
            }
        });
    }
}

fn say_dropped() {
    eprintln!(
        "airlock: note: stdin is not passed to the sandbox (the program's stdin is /dev/null); \
         pass data as a file with --put LOCAL=NAME, or the program itself as -"
    );
}
