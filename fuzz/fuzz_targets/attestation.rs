//! The executor's attestation as the broker reads it: the `ready` notification's params through
//! `check_ready` (the one check a run, a kernel and a warm pool all use), and a `refused`
//! notification's params. Oracle: a proof the broker accepts holds every layer — no_new_privs,
//! seccomp filter mode, no capabilities, one uid-map line, loopback only, pid 1 of its own pid
//! namespace, and every isolated namespace present and not the broker's.
#![no_main]

use std::collections::BTreeMap;

use airlock_broker::fuzzing::{ready, refused};
use airlock_executor::attest::{Attestation, ISOLATED_NAMESPACES};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = refused(Some(v.clone()));
    let broker: BTreeMap<String, String> = ISOLATED_NAMESPACES
        .iter()
        .chain(&["cgroup"])
        .map(|ns| (ns.to_string(), format!("{ns}:[4026531835]")))
        .collect();
    if ready(Some(v.clone()), &broker).is_err() {
        return;
    }
    let a: Attestation = serde_json::from_value(v).expect("an accepted proof is an attestation");
    assert!(a.no_new_privs && a.seccomp_mode == 2 && a.cap_eff == 0 && a.cap_prm == 0);
    assert_eq!(a.uid_map.lines().count(), 1);
    assert_eq!(a.interfaces, ["lo"]);
    assert_eq!(a.pid, 1);
    for ns in ISOLATED_NAMESPACES {
        let guest = a.namespaces.get(ns).map(String::as_str).unwrap_or_default();
        assert!(!guest.is_empty() && Some(guest) != broker.get(ns).map(String::as_str));
    }
});
