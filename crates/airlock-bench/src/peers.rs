//! The host-process peers: plain python3 (the floor), bubblewrap and unshare wrapping it.
use std::path::Path;

use crate::table::FLOOR;

/// A way to start python3 that a user could pick instead of airlock.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Name in the table.
    pub name: &'static str,
    /// Words before the interpreter's own argv.
    pub prefix: Vec<String>,
    /// Why it cannot be measured here, if it cannot.
    pub missing: Option<String>,
}

impl Peer {
    /// `prefix python -I -S -c code`.
    pub fn argv(&self, python: &Path, code: &str) -> Vec<String> {
        let mut argv = self.prefix.clone();
        argv.extend([
            python.display().to_string(),
            "-I".into(),
            "-S".into(),
            "-c".into(),
            code.into(),
        ]);
        argv
    }
}

fn words(s: &[&str]) -> Vec<String> {
    s.iter().map(|w| w.to_string()).collect()
}

fn on_path(name: &str) -> bool {
    airlock_broker::interpreter::which(name).is_some()
}

/// The peers, each checked with one trial run.
pub fn peers(python: &Path) -> Vec<Peer> {
    let mut all = vec![Peer {
        name: FLOOR,
        prefix: Vec::new(),
        missing: None,
    }];
    // bwrap: every namespace, the host tree read-only, fresh /proc, /dev and /tmp.
    all.push(Peer {
        name: "bubblewrap + python3",
        prefix: words(&[
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--",
        ]),
        missing: (!on_path("bwrap")).then(|| "not installed (apt-get install bubblewrap)".into()),
    });
    all.push(Peer {
        name: "unshare + python3",
        prefix: words(&[
            "unshare",
            "--user",
            "--map-root-user",
            "--net",
            "--ipc",
            "--uts",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--",
        ]),
        missing: (!on_path("unshare")).then(|| "not installed (util-linux)".into()),
    });
    for p in &mut all {
        if p.missing.is_none() {
            if let Err(e) = crate::host::start_ms(&p.argv(python, "print(1)"), "1\n") {
                p.missing = Some(format!("unusable here: {e}"));
            }
        }
    }
    all
}
