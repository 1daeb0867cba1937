//! Resource attacks: memory, time, output, processes. Each ends in the right status, promptly,
//! with nothing left behind.
use super::support::*;

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
    let v = run_py(As::Me, code, &["--timeout", "30"]);
    assert_completed(&v);
    assert!(
        v["stdout"].as_str().unwrap().starts_with("capped 27"),
        "{v}"
    );
}

#[test]
fn many_files_cannot_fill_the_host_disk() {
    // Each file is under RLIMIT_FSIZE; the sum is what the disk watchdog bounds (review #11).
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let code = "i = 0\nwhile i < 200000:\n    open('f%d' % i, 'wb').write(b'x' * 65536)\n    i += 1\nprint('WROTE ALL')";
    let v = run_py(As::Me, code, &["--work-dir", d, "--timeout", "60"]);
    assert_eq!(status(&v), "disk_limit", "{v}");
    assert_eq!(v["error"]["code"], -32004);
    assert!(!v["stdout"].as_str().unwrap().contains("WROTE ALL"));
    // Stopped near the 1 GiB default, far below what the loop would write (12.5 GiB).
    let written: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(written < 3 * (1 << 30), "{written} bytes written");
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

#[test]
fn the_program_runs_inside_its_cgroup_from_its_first_line() {
    // The move into the run's cgroup overlaps interpreter start-up; code is sent only after it.
    let code = "print(open('/proc/self/cgroup').read())";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        let cgroups = v["stdout"].as_str().unwrap();
        let memory = cgroups
            .lines()
            .find(|l| l.contains(":memory:"))
            .unwrap_or("");
        if v["enforcement"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "cgroup")
        {
            assert!(memory.contains("/airlock-"), "{who:?}: {cgroups}");
        } else {
            assert!(!memory.contains("/airlock-"), "{who:?}: {cgroups}");
        }
    }
}
