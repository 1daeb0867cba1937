//! RLIMIT_NPROC inside a fresh user namespace: what it bounds, for whom (see the crate docs).

use super::{is_root, probe, stdout};

fn field(text: &str, key: &str) -> String {
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .to_string()
}

#[test]
fn nproc_in_a_userns_bounds_an_unprivileged_fork_bomb_per_namespace() {
    // 30 other host processes of the same user already exceed the limit of 10.
    let text = stdout(&probe(true, &["nproc", "10", "30", "1"]));
    // The executor itself is one of the namespace's 10 processes.
    assert_eq!(field(&text, "bomb_forks"), "9", "{text}");
    assert_eq!(field(&text, "stop_errno"), libc::EAGAIN.to_string());
    assert_eq!(
        field(&text, "witness_forked"),
        "true",
        "host-side sibling was starved"
    );
    // Without the user namespace the same limit counts every process of the host user.
    let text = stdout(&probe(true, &["nproc", "10", "30", "0"]));
    assert_eq!(field(&text, "bomb_forks"), "0", "{text}");
}

#[test]
fn nproc_does_not_bound_host_root() {
    if !is_root() {
        println!("SKIP nproc_does_not_bound_host_root: needs root");
        return;
    }
    let text = stdout(&probe(false, &["nproc", "10", "5", "1"]));
    assert_eq!(field(&text, "bomb_forks"), field(&text, "cap"), "{text}");
}
