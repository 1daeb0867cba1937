//! The admission budget (issue #29) attacked through the real binary, as root and as
//! `airlock-test`: a token holder creates sandboxes until the server refuses and fills every
//! one's tmpfs to its bound while a run holds memory; the host's committed tmpfs (`Shmem` of
//! /proc/meminfo) and the sum the server accounts stay within `--memory-budget-mb`, the refusal
//! says the numbers, a dispose or a pause makes room, a resume over the budget leaves the
//! sandbox paused with nothing lost, and a run in a live sandbox still completes.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};

use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];
const OVER_CAPACITY: i64 = -32018;
const MIB_KIB: u64 = 1024;
/// The server's budget: three sandboxes of 128 MiB disk + 256 MiB memory.
const BUDGET_MB: u64 = 1152;
/// Each sandbox's disk bound (policy `disk_mb`).
const DISK_MB: u64 = 128;
/// Each run's memory limit (`--memory`): the tmpfs pages a run writes are charged to its
/// cgroup under a root server, so it holds the disk it fills and what it allocates.
const MEMORY_MB: u64 = 256;
/// Sandboxes the attacker asks for: without the budget, 10 x 128 MiB of tmpfs (1280 MiB)
/// would be committed, past the budget.
const ASKED: usize = 10;
/// What other processes on this shared host may add to `Shmem` while the test runs.
const NOISE_MB: u64 = 64;

/// Fills `/work` with 1 MiB writes until ENOSPC (32 MiB a file: a file is bounded by
/// `RLIMIT_FSIZE`) while 48 MiB of touched memory are held; prints the bytes written and the
/// errno that stopped it.
const FILL: &str = "\
import errno
hold = bytearray(48 << 20)
for i in range(0, len(hold), 4096):
    hold[i] = 1
chunk = b'\\xa5' * (1 << 20)
n = 0
stop = None
for k in range(1024):
    with open('/work/fill%d' % k, 'wb', buffering=0) as f:
        try:
            for _ in range(32):
                n += f.write(chunk)
        except OSError as e:
            stop = errno.errorcode.get(e.errno)
    if stop:
        break
print(n, stop)
";

fn chown(user: &str, path: &Path) {
    let st = std::process::Command::new("chown")
        .args(["-R", &format!("{user}:")])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// A server with the budget, the disk bound and a state directory, running as `user`.
fn serve(user: Option<&str>, dir: &Path) -> WsServer {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("floor = \"os_process\"\n[limits]\ndisk_mb = {DISK_MB}\ntimeout_seconds = 120\n"),
    )
    .unwrap();
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    if let Some(u) = user {
        chown(u, dir);
    }
    WsServer::start_as(
        user,
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--memory",
            &MEMORY_MB.to_string(),
            "--memory-budget-mb",
            &BUDGET_MB.to_string(),
        ],
    )
}

fn spec() -> Value {
    json!({"spec": {"requires": ["run_code", "exec", "files_in", "files_out", "files_list",
                                 "snapshot"]}})
}

async fn run(c: &mut WsClient, sid: &str, code: &str) -> Value {
    let r = c
        .call(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": code, "timeout_s": 120}),
        )
        .await;
    result_of(&r).clone()
}

/// The over-budget refusal: `over_capacity`, with the numbers in the message and `data`.
fn assert_budget_refusal(r: &Value) {
    assert_eq!(error_code(r), OVER_CAPACITY, "{r}");
    let e = &r["error"];
    assert_eq!(e["data"]["kind"], "MemoryBudgetExceeded", "{r}");
    assert_eq!(e["data"]["budget_mb"], BUDGET_MB, "{r}");
    assert_eq!(e["data"]["need_mb"], DISK_MB + MEMORY_MB, "{r}");
    let held = e["data"]["held_mb"].as_u64().unwrap();
    assert!(
        held <= BUDGET_MB && held + DISK_MB + MEMORY_MB > BUDGET_MB,
        "{r}"
    );
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("may hold 384 MiB (disk 128 MiB + memory 256 MiB)")
            && msg.contains(&format!("the budget is {BUDGET_MB} MiB")),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sandboxes_never_commit_more_host_memory_than_the_budget() {
    for user in IDENTITIES {
        let dir = tempfile::tempdir().unwrap();
        let shmem_before = shmem_kib();
        let server = serve(user, dir.path());
        let mut c = server.connect().await;
        // The attack: ask for more sandboxes than the budget holds.
        let mut sids = Vec::new();
        let mut refusals = Vec::new();
        for _ in 0..ASKED {
            let r = c.call("sandbox.create", spec()).await;
            match r.get("result") {
                Some(d) => sids.push(d["sandbox_id"].as_str().unwrap().to_owned()),
                None => refusals.push(r),
            }
        }
        assert_eq!(sids.len(), 3, "{user:?}: {refusals:?}");
        refusals.iter().for_each(assert_budget_refusal);
        // Fill every sandbox's disk to its bound, memory held meanwhile.
        for sid in &sids {
            let out = run(&mut c, sid, FILL).await;
            // The broker ends a run that filled its disk (`disk_limit`) once it has said so.
            let status = out["status"].as_str().unwrap();
            assert!(
                ["completed", "disk_limit"].contains(&status),
                "{user:?}: {out}"
            );
            let line = out["stdout"].as_str().unwrap().trim().to_owned();
            let (bytes, stop) = line.split_once(' ').unwrap();
            assert_eq!(stop, "ENOSPC", "{user:?}: {line}");
            let mb = bytes.parse::<u64>().unwrap() >> 20;
            assert!((DISK_MB - 8..=DISK_MB).contains(&mb), "{user:?}: {line}");
        }
        // External evidence: the host's tmpfs grew by the filled disks, within the budget.
        let grown_mb = shmem_kib().saturating_sub(shmem_before) / MIB_KIB;
        eprintln!(
            "{user:?}: Shmem grew {grown_mb} MiB with {} full sandboxes",
            sids.len()
        );
        assert!(
            grown_mb >= 3 * (DISK_MB - 8) - NOISE_MB,
            "{user:?}: {grown_mb}"
        );
        assert!(grown_mb <= BUDGET_MB + NOISE_MB, "{user:?}: {grown_mb}");
        // At the budget a run in a live sandbox still completes.
        let out = run(&mut c, &sids[0], "print('still served')").await;
        assert_eq!(out["stdout"], "still served\n", "{user:?}: {out}");
        assert_budget_refusal(&c.call("sandbox.create", spec()).await);
        // A dispose makes room for one more.
        result_of(
            &c.call("sandbox.dispose", json!({"sandbox_id": sids[0]}))
                .await,
        );
        let d = c.call("sandbox.create", spec()).await;
        let fourth = result_of(&d)["sandbox_id"].as_str().unwrap().to_owned();
        assert_budget_refusal(&c.call("sandbox.create", spec()).await);
        // A pause makes room too; its resume over the budget is refused and it stays paused.
        let paused = sids[1].clone();
        let r = c.call("sandbox.pause", json!({"sandbox_id": paused})).await;
        assert_eq!(result_of(&r)["state"], "paused", "{r}");
        let d = c.call("sandbox.create", spec()).await;
        let fifth = result_of(&d)["sandbox_id"].as_str().unwrap().to_owned();
        let r = c
            .call("sandbox.resume", json!({"sandbox_id": paused}))
            .await;
        assert_budget_refusal(&r);
        let listed = c.call("sandbox.list", json!({})).await;
        let entry = result_of(&listed)["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["sandbox_id"] == paused.as_str())
            .cloned();
        assert_eq!(entry.unwrap()["state"], "paused", "{listed}");
        // Room made again, it resumes with everything it had.
        result_of(
            &c.call("sandbox.dispose", json!({"sandbox_id": fifth}))
                .await,
        );
        let size = "import os; print(sum(e.stat().st_size for e in os.scandir('/work')) >> 20)";
        let out = run(&mut c, &paused, size).await;
        let mb: u64 = out["stdout"].as_str().unwrap().trim().parse().unwrap();
        assert!(mb >= DISK_MB - 8, "{user:?}: {out}");
        for sid in [&paused, &sids[2], &fourth] {
            result_of(&c.call("sandbox.dispose", json!({"sandbox_id": sid})).await);
        }
        // Every share given back: a full budget's worth of sandboxes fits again.
        for _ in 0..3 {
            result_of(&c.call("sandbox.create", spec()).await);
        }
    }
}
