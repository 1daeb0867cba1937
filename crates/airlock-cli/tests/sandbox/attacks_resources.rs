//! Resource attacks: memory, time, output, processes. Each ends in the right status, promptly,
//! with nothing left behind.
use super::support::*;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn a_gradual_memory_bomb_is_a_memory_limit() {
    for who in identities() {
        let code = "x = []\nwhile True:\n    x.append(bytearray(1 << 20))";
        let v = run_py(who, code, &["--memory", "128", "--timeout", "20"]);
        assert_eq!(status(&v), "memory_limit", "{v}");
        assert_eq!(v["error"]["code"], -32003);
    }
}

#[test]
fn one_huge_allocation_is_a_memory_limit() {
    for who in identities() {
        let v = run_py(
            who,
            "x = bytearray(50 * (1 << 30))\nprint('ALLOCATED')",
            &["--memory", "128"],
        );
        assert_eq!(status(&v), "memory_limit", "{v}");
        assert!(!v["stdout"].as_str().unwrap().contains("ALLOCATED"));
    }
}

#[test]
fn an_infinite_loop_ignoring_sigterm_times_out() {
    for who in identities() {
        let _only = exclusive();
        let code = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('spinning', flush=True)\nwhile True:\n    pass";
        let v = run_py(who, code, &["--timeout", "1.5"]);
        assert_eq!(status(&v), "timeout", "{v}");
        assert_eq!(v["error"]["code"], -32002);
        assert_eq!(v["stdout"], "spinning\n");
        let wall = v["wall_time_ms"].as_f64().unwrap();
        assert!((1400.0..6000.0).contains(&wall), "wall {wall} ms");
        let left = run_survivors(&marker("none"));
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn an_output_flood_is_truncated_and_the_run_completes() {
    for who in identities() {
        let code = "import sys\nfor i in range(200000):\n    sys.stdout.write('x' * 100 + '\\n')\nsys.stderr.write('e' * 1000000)\nprint('done', file=sys.stderr)";
        let v = run_py(who, code, &["--max-output", "10000", "--timeout", "30"]);
        assert_completed(&v);
        assert_eq!(v["stdout"].as_str().unwrap().len(), 10000);
        assert_eq!(v["stdout_truncated"], true);
        assert_eq!(v["stdout_bytes"], 200000 * 101);
        assert_eq!(v["stderr_truncated"], true);
        assert_eq!(v["stderr_bytes"], 1000005);
    }
}

#[test]
fn a_disk_fill_is_capped_by_the_file_size_limit() {
    let code = "try:\n    with open('big', 'wb') as f:\n        for _ in range(1000):\n            f.write(b'x' * (1 << 20))\n    print('WROTE 1000 MiB')\nexcept OSError as e:\n    print('capped', e.errno)";
    for who in identities() {
        let v = run_py(who, code, &["--timeout", "30"]);
        assert_completed(&v);
        assert!(
            v["stdout"].as_str().unwrap().starts_with("capped 27"),
            "{who:?}: {v}"
        );
    }
}

/// Runs `code` under `--disk 64` while sampling the host's shared memory (every byte a sandbox
/// writes lives on its tmpfs); returns the run's JSON and the largest growth seen while it ran.
fn fill_run(who: As, code: &str) -> (serde_json::Value, u64) {
    peak_growth("Shmem", || {
        run_py(who, code, &["--disk", "64", "--timeout", "60"])
    })
}

/// Each attack writes until the kernel says no, reports how far it got, and holds on for a
/// moment (so the fill is still there for the report).
const FILL_ATTACKS: [(&str, &str); 4] = [
    (
        "many small files",
        "import os\ni = 0\ntry:\n    while i < 200000:\n        open('f%d' % i, 'wb').write(b'x' * 65536)\n        i += 1\nexcept OSError as e:\n    print('STOPPED', e.errno, i * 65536)",
    ),
    (
        "fallocate bursts",
        "import os\ni = 0\ntry:\n    while i < 1000:\n        fd = os.open('/tmp/a%d' % i, os.O_CREAT | os.O_WRONLY)\n        os.posix_fallocate(fd, 0, 8 << 20)\n        i += 1\nexcept OSError as e:\n    print('STOPPED', e.errno, i * (8 << 20))",
    ),
    (
        "an unlinked open file",
        "import os\nf = open('/dev/shm/u', 'wb')\nos.unlink('/dev/shm/u')\nn = 0\ntry:\n    while n < (8 << 30):\n        f.write(b'x' * (1 << 20)); f.flush(); n += 1 << 20\nexcept OSError as e:\n    print('STOPPED', e.errno, n)",
    ),
    (
        "a directory the owner cannot list",
        "import os\nos.makedirs('/work/d')\nos.chmod('/work/d', 0o300)\nn = 0\ntry:\n    while n < (8 << 30):\n        open('/work/d/f%d' % n, 'wb').write(b'x' * (4 << 20)); n += 4 << 20\nexcept OSError as e:\n    print('STOPPED', e.errno, n)",
    ),
];

#[test]
fn writes_cannot_pass_the_disk_bound() {
    let _only = exclusive();
    for who in identities() {
        for (what, attack) in FILL_ATTACKS {
            let code = format!("{attack}\nimport time\ntime.sleep(0.5)");
            let (v, peak) = fill_run(who, &code);
            let out = v["stdout"].as_str().unwrap_or_default();
            // The kernel stopped the writes (ENOSPC, or EFBIG from the per-file limit) well
            // short of what the loop asked for -- or the broker's disk watch, which sees the
            // full tmpfs on its next tick, killed the run before the guest could say so (then
            // only the host's evidence below speaks).
            if !out.is_empty() {
                assert!(
                    out.starts_with("STOPPED 28 ") || out.starts_with("STOPPED 27 "),
                    "{who:?} {what}: {v}"
                );
                let wrote: u64 = out.split_whitespace().nth(2).unwrap().parse().unwrap();
                assert!(wrote <= 64 << 20, "{who:?} {what}: wrote {wrote}");
            }
            // The host saw at most the bound (plus slack for other tests' runs) while it ran.
            assert!(peak < 96 << 20, "{who:?} {what}: host shmem grew {peak}");
            assert_eq!(status(&v), "disk_limit", "{who:?} {what}: {v}");
            assert_eq!(v["error"]["code"], -32004);
        }
        // Entries are bounded too: empty files cost no bytes but each takes an inode.
        let (v, peak) = fill_run(
            who,
            "import os\ni = 0\ntry:\n    while i < 1000000:\n        open('/tmp/e%d' % i, 'w').close(); i += 1\nexcept OSError as e:\n    print('STOPPED', e.errno, i)\nimport time\ntime.sleep(0.5)",
        );
        let out = v["stdout"].as_str().unwrap_or_default();
        if !out.is_empty() {
            assert!(out.starts_with("STOPPED 28 "), "{who:?} entries: {v}");
            let made: u64 = out.split_whitespace().nth(2).unwrap().parse().unwrap();
            assert!(made <= 100_000, "{who:?}: {made} entries");
        }
        assert!(peak < 96 << 20, "{who:?} entries: host shmem grew {peak}");
        assert_eq!(status(&v), "disk_limit", "{who:?} entries: {v}");
    }
}

#[test]
fn a_fork_bomb_is_contained_and_nothing_survives() {
    for who in identities() {
        let _only = exclusive();
        let m = marker("forkbomb");
        let script = format!(": {m}; b() {{ b | b & }}; b");
        let v = exec(who, &["/bin/sh", "-c", &script], &["--timeout", "3"]);
        assert!(
            ["timeout", "completed", "error", "killed"].contains(&status(&v)),
            "{v}"
        );
        let left = run_survivors(&m);
        assert!(
            left.is_empty(),
            "fork bomb survivors: {:?}",
            &left[..left.len().min(5)]
        );
    }
}

#[test]
fn a_cpu_quota_is_enforced_or_the_run_is_refused() {
    // Spin for 1.5 s of wall time and measure the CPU time actually granted.
    let code = "import time\nend=time.monotonic()+1.5\nwhile time.monotonic()<end: pass\nprint(round(time.process_time()/1.5, 2))";
    for who in identities() {
        let v = run_py(who, code, &["--cpus", "0.2", "--timeout", "20"]);
        if v["enforcement"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "cgroup")
        {
            assert_completed(&v);
            let share: f64 = v["stdout"].as_str().unwrap().trim().parse().unwrap();
            assert!(share < 0.45, "a 0.2-core quota granted {share} of a core");
        } else {
            // No usable cpu cgroup (the unprivileged user here): refused, never run unbounded.
            assert_eq!(status(&v), "refused", "{who:?}: {v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains("cpu"),
                "{v}"
            );
        }
    }
}

/// The memory-cgroup line of the live guest interpreter as the host sees it, sampled until the
/// run is over (the last sample is taken while the program sleeps after its first line).
fn host_view_of_the_guests_memory_cgroup(done: &AtomicBool) -> Option<String> {
    let mut last = None;
    while !done.load(Ordering::Relaxed) {
        for found in guests() {
            let pid = found.split(':').next().unwrap_or_default();
            if let Ok(cg) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
                // On the zygote pass the zygote itself is found too: the guest is the process
                // in a run's cgroup, when there is one.
                if let Some(l) = cg.lines().find(|l| l.contains(":memory:")) {
                    if l.contains("/airlock-") || last.is_none() {
                        last = Some(l.to_owned());
                    }
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    last
}

#[test]
fn the_program_runs_inside_its_cgroup_from_its_first_line() {
    // The move into the run's cgroup overlaps interpreter start-up; code is sent only after it.
    // The program's first line records its cgroup; it is the same one later, when the host sees
    // the process in the run's cgroup. (Inside, the path is relative to the run's cgroup
    // namespace, so it reads "/" when the move came before the namespace was made.)
    let code = "import time\nfirst = open('/proc/self/cgroup').read()\ntime.sleep(1.5)\nprint(first == open('/proc/self/cgroup').read())";
    let _only = exclusive();
    for who in identities() {
        let done = AtomicBool::new(false);
        let (v, host) = std::thread::scope(|s| {
            let watcher = s.spawn(|| host_view_of_the_guests_memory_cgroup(&done));
            let v = run_py(who, code, &[]);
            done.store(true, Ordering::Relaxed);
            (v, watcher.join().unwrap())
        });
        assert_completed(&v);
        assert_eq!(
            v["stdout"], "True\n",
            "{who:?}: the cgroup changed after the first line: {v}"
        );
        let host = host.unwrap_or_default();
        if v["enforcement"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "cgroup")
        {
            assert!(host.contains("/airlock-"), "{who:?}: host sees {host:?}");
        } else {
            assert!(!host.contains("/airlock-"), "{who:?}: host sees {host:?}");
        }
    }
}
