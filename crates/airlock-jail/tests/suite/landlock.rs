//! Landlock: reads and writes outside the policy are denied, inside are allowed, TCP and
//! signals are restricted, and nonexistent paths are reported.

use super::{assert_passed, open_tempdir, probe, BOTH};

#[test]
fn landlock_confines_reads_and_writes() {
    for nonroot in BOTH {
        let dir = open_tempdir();
        let base = dir.path().join("t");
        std::fs::create_dir(&base).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_passed(&probe(nonroot, &["landlock", base.to_str().unwrap()]));
    }
}

#[test]
fn abi_version_is_detected() {
    let abi = airlock_jail::landlock::abi_version().expect("landlock enabled on this machine");
    assert!(abi >= 6, "the jail needs scoping (abi 6), got {abi}");
}
