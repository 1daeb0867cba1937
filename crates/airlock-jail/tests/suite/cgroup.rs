//! cgroups (root only; the one permitted skip): create with limits, account, OOM, kill, remove.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use airlock_jail::cgroup::{support, CgroupLimits, RunCgroup};

use super::is_root;

fn skip_unless_root(test: &str) -> bool {
    if !is_root() {
        println!("SKIP {test}: creating cgroups needs root (or delegation) on this machine");
        return true;
    }
    false
}

#[test]
fn run_cgroup_limits_kills_and_removes() {
    if skip_unless_root("run_cgroup_limits_kills_and_removes") {
        return;
    }
    let s = support();
    assert!(s.v1_memory && s.v1_pids && s.v1_cpu && s.v2_kill, "{s:?}");
    let name = format!("test-kill-{}", std::process::id());
    let limits = CgroupLimits {
        memory_bytes: Some(256 << 20),
        pids: Some(16),
        cpu_millicores: Some(500),
    };
    let cg = RunCgroup::create(&name, &limits).unwrap();
    let paths = cg.paths();
    assert_eq!(paths.len(), 4, "{paths:?}");
    let mem = paths
        .iter()
        .find(|p| p.to_string_lossy().contains("/memory/"))
        .unwrap();
    let limit = std::fs::read_to_string(mem.join("memory.limit_in_bytes")).unwrap();
    assert_eq!(limit.trim(), (256u64 << 20).to_string());
    let pids = paths
        .iter()
        .find(|p| p.to_string_lossy().contains("/pids/"))
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(pids.join("pids.max"))
            .unwrap()
            .trim(),
        "16"
    );
    let cpu = paths
        .iter()
        .find(|p| p.to_string_lossy().contains("/cpu/"))
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(cpu.join("cpu.cfs_quota_us"))
            .unwrap()
            .trim(),
        "50000"
    );

    let mut child = Command::new("/bin/sh")
        .args(["-c", "sleep 60 & sleep 60 & wait"])
        .spawn()
        .unwrap();
    cg.add_process(child.id() as i32).unwrap();
    assert!(cg.pids().contains(&(child.id() as i32)));
    // Children started before the move stay behind; wait until the new ones appear inside.
    let start = std::time::Instant::now();
    while cg.pids().len() < 3 && start.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cg.kill_all().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(cg.pids().is_empty());
    assert!(cg.memory_bytes().is_some());
    drop(cg);
    for p in &paths {
        assert!(!p.exists(), "{} not removed", p.display());
    }
}

#[test]
fn memory_limit_triggers_the_oom_killer() {
    if skip_unless_root("memory_limit_triggers_the_oom_killer") {
        return;
    }
    let name = format!("test-oom-{}", std::process::id());
    let cg = RunCgroup::create(
        &name,
        &CgroupLimits {
            memory_bytes: Some(32 << 20),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!cg.oom_killed());
    // `tail -c` keeps the last 200 MiB of its input in memory: far over the limit.
    let mut child = Command::new("/bin/sh")
        .args([
            "-c",
            "read go; head -c 300000000 /dev/zero | tail -c 200000000 > /dev/null",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    cg.add_process(child.id() as i32).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the hog finished under a 32 MiB limit");
    assert!(cg.oom_killed(), "oom_kill not recorded");
    let peak = cg.peak_memory_bytes().unwrap();
    assert!(peak > 16 << 20 && peak <= 33 << 20, "peak {peak}");
}

#[test]
fn bad_names_are_refused() {
    for bad in ["", "../x", "a/b", "x y", &"a".repeat(65)] {
        assert!(
            RunCgroup::create(bad, &CgroupLimits::default()).is_err(),
            "{bad:?}"
        );
    }
}
