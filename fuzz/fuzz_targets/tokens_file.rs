//! A tenants token file (`airlock_server::tenancy::tokens`): any text through the parser the server
//! and `airlock token` read it with. Oracles: no panic; an accepted file renders back to text
//! that parses to the same entries (what `token add|rm` writes is what the server reads); no
//! entry names an invalid or reserved tenant; a token finds at most its own tenant.
#![no_main]

use airlock_server::tenancy::tokens;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let Ok(entries) = tokens::parse("fuzz", text) else {
        return;
    };
    for e in &entries {
        assert!(
            tokens::check_name(e.tenant.as_str()).is_ok(),
            "{:?}",
            e.tenant
        );
    }
    let again = tokens::parse("fuzz", &tokens::render(&entries)).expect("a rendered file parses");
    assert_eq!(again, entries);
    // A presented token is found only through its own digest.
    if let Some(t) = tokens::find(&entries, text.as_bytes()) {
        let d = tokens::digest(text.as_bytes());
        assert!(entries.iter().any(|e| e.tenant == t && e.digest == d));
    }
});
