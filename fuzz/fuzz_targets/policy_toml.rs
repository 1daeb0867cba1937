//! `policy.toml` (`Policy::from_toml_str`): any text ends in a policy or a typed error, never a
//! panic; only text within the size cap is accepted; the verdict is a function of the text.
#![no_main]

use airlock_policy::{Policy, MAX_POLICY_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = Policy::from_toml_str(text);
    if first.is_ok() {
        assert!(text.len() <= MAX_POLICY_BYTES);
    }
    assert_eq!(first, Policy::from_toml_str(text));
});
