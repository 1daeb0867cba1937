//! `mcp.toml` (`parse_upstreams`), an `--upstream NAME=COMMAND` flag (`UpstreamSpec::parse`)
//! and the word splitter both use: any text ends in upstreams or an error, never a panic.
//! Oracles: an accepted upstream has an identifier name of at most 32 bytes and a non-empty
//! argv; only text within the size cap is accepted.
#![no_main]

use airlock_mcp::config::{is_identifier, UpstreamSpec, MAX_UPSTREAM_NAME};
use airlock_mcp::config_file::{parse_upstreams, MAX_CONFIG_BYTES};
use airlock_mcp::words;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(ups) = parse_upstreams(text) {
        assert!(text.len() <= MAX_CONFIG_BYTES);
        ups.iter().for_each(check);
    }
    if let Ok(up) = UpstreamSpec::parse(text) {
        check(&up);
    }
    let _ = words::split(text);
});

fn check(up: &UpstreamSpec) {
    assert!(is_identifier(&up.name) && up.name.len() <= MAX_UPSTREAM_NAME);
    assert!(!up.argv.is_empty());
}
