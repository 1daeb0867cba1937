//! The arguments of every tool `airlock mcp` serves (`execute`, `run_python`, `exec`,
//! `write_file` with its base64, `read_file`, `list_files`) through the server's own parsers,
//! up to where a sandbox would be touched. The first input byte picks the tool; the rest is
//! the arguments' JSON. Oracles: every accepted path is relative, confined and re-parses to
//! itself; the timeout is positive and within the cap; argv and env hold no NUL and env names
//! are `[A-Za-z_][A-Za-z0-9_]*`; bytes written or read stay within the per-file cap.
#![no_main]

use std::time::Duration;

use airlock_mcp::fuzzing::tool_arguments;
use airlock_policy::{GuestRelPath, TransferLimits};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const TOOLS: [&str; 6] = [
    "execute",
    "run_python",
    "exec",
    "write_file",
    "read_file",
    "list_files",
];

fuzz_target!(|input: &[u8]| {
    let Some((&selector, json)) = input.split_first() else {
        return;
    };
    let Ok(Value::Object(args)) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let name = TOOLS[usize::from(selector) % TOOLS.len()];
    let max = Duration::from_secs(300);
    let limits = TransferLimits {
        max_bytes_per_file: 4096,
        ..TransferLimits::DEFAULT
    };
    let Ok(got) = tool_arguments(name, &args, max, &limits) else {
        return;
    };
    for p in &got.paths {
        assert_eq!(GuestRelPath::parse(p.as_str()).as_ref(), Ok(p));
        assert!(p.segments().all(|s| !s.is_empty() && s != "." && s != ".."));
    }
    assert!(got.timeout.is_none_or(|t| t <= max));
    assert!(got.argv.iter().all(|a| !a.contains('\0')));
    for (k, v) in &got.env {
        let mut cs = k.chars();
        assert!(cs
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_'));
        assert!(cs.all(|c| c.is_ascii_alphanumeric() || c == '_'));
        assert!(!v.contains('\0'));
    }
    assert!(got.bytes.is_none_or(|n| n <= limits.max_bytes_per_file));
});
