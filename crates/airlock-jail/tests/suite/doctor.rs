//! doctor: every layer is reported, each from a real attempt, with a fix when missing.

use super::{probe, stdout};
use airlock_jail::doctor::{check_all, LAYERS};

#[test]
fn doctor_reports_every_layer_in_order() {
    // Called from the multi-threaded test harness on purpose: the probes must cope.
    let reports = check_all();
    let names: Vec<&str> = reports.iter().map(|r| r.layer.as_str()).collect();
    assert_eq!(names, LAYERS);
    for r in &reports {
        assert!(!r.detail.is_empty());
        assert_eq!(r.available, r.fix.is_none(), "{r:?}");
    }
    // The rootless core the jail refuses to run without works on this machine.
    for core in [
        "userns", "netns", "pidns", "utsns", "mountns", "seccomp", "landlock",
    ] {
        let r = reports.iter().find(|r| r.layer == core).unwrap();
        assert!(r.available, "{r:?}");
        assert!(
            r.detail.starts_with("ok") || r.detail.contains("; ok"),
            "{r:?}"
        );
    }
}

#[test]
fn doctor_as_an_unprivileged_user_explains_cgroups() {
    let out = probe(true, &["doctor"]);
    let text = stdout(&out);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), LAYERS.len(), "{text}");
    for (line, layer) in lines.iter().zip(LAYERS) {
        assert_eq!(line[0], *layer);
        if line[1] == "false" {
            assert_ne!(line[3], "-", "missing fix for {layer}");
            assert!(
                line[2].contains("os error") || line[2].contains("failed"),
                "{line:?}"
            );
        }
    }
    let userns = &lines[0];
    assert_eq!(
        userns[1], "true",
        "unprivileged userns must work here: {userns:?}"
    );
}
