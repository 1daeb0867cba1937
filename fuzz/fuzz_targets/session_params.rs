//! The params of every method a WebSocket or stdio session serves (`execute`, `sandbox.*`,
//! `files.*` with their base64, paths and offsets, `outputs.collect` and the declared outputs
//! of `sandbox.create`, `scope.dispose`, `run.cancel`), through the same functions the session
//! runs, up to where a sandbox would be touched. The first input byte picks the method (0x80:
//! no params at all); the rest is the params' JSON. Oracles: no panic; every accepted path is
//! relative, confined and re-parses to itself; a `files.write` carries at most one chunk and a
//! `files.read` asks for at most one; resolved limits stay within the ceilings.
#![no_main]

use airlock_policy::{GuestRelPath, HostPolicy};
use airlock_protocol::method as m;
use airlock_server::ceilings::Ceilings;
use airlock_server::fuzzing::{session_params, MAX_CHUNK, SESSION_METHODS};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// `execute` and every session method.
fn method(i: u8) -> &'static str {
    let n = usize::from(i) % (SESSION_METHODS.len() + 1);
    if n == 0 {
        m::EXECUTE
    } else {
        SESSION_METHODS[n - 1]
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, json)) = input.split_first() else {
        return;
    };
    let method = method(selector & 0x7f);
    let params = if selector & 0x80 != 0 {
        None
    } else {
        match serde_json::from_slice::<Value>(json) {
            Ok(v) => Some(v),
            Err(_) => return,
        }
    };
    let Ok(got) = session_params(method, params, &HostPolicy::default()) else {
        return;
    };
    for p in &got.paths {
        assert_eq!(GuestRelPath::parse(p.as_str()).as_ref(), Ok(p));
        assert!(!p.as_str().starts_with('/'));
        assert!(p.segments().all(|s| !s.is_empty() && s != "." && s != ".."));
    }
    assert!(got.write_bytes.is_none_or(|n| n as u64 <= MAX_CHUNK));
    assert!(got.read_len.is_none_or(|n| n <= MAX_CHUNK));
    if let Some(l) = got.limits {
        let c = Ceilings::default();
        assert!(l.timeout <= c.timeout);
        assert!(l.memory_bytes <= c.memory_bytes);
        assert!(l.max_tool_calls <= c.max_tool_calls);
        assert!(l.max_output_bytes <= c.max_output_bytes);
    }
});
