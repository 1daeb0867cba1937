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
/// Sandboxes the attacker asks for: without the budget, 12 x 128 MiB of tmpfs (1536 MiB)
/// would be committed, past the budget and its noise margin.
const ASKED: usize = 12;
/// What other processes on this shared host (and tests running beside this one) may add to
/// `Shmem` while the test runs.
const NOISE_MB: u64 = 160;

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
    let _shmem = SHMEM.lock().await;
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

/// Alice's quotas; Bob has no section, so the server's limits are his.
const TENANT_POLICY: &str = r#"floor = "os_process"
[limits]
disk_mb = 64
timeout_seconds = 120
[tenants.alice]
max_sandboxes = 2
max_concurrent_runs = 1
max_snapshots = 1
egress_allow = ["pypi.org"]
"#;

fn kind_of(r: &Value) -> &str {
    r["error"]["data"]["kind"].as_str().unwrap_or("")
}

/// Two tenants on one server (a tenants token file made by `airlock token add`): Alice at each
/// of her quotas is refused — `over_capacity` for `max_sandboxes`, `max_concurrent_runs` and
/// `max_snapshots`, `sandbox_refused` naming the host for a spec past her egress ceiling —
/// while Bob, with no section, creates, runs (one of them while Alice's run holds her quota)
/// and snapshots. As root and as `airlock-test`.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_at_its_quotas_is_refused_while_another_creates_and_runs() {
    for user in IDENTITIES {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, TENANT_POLICY).unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
        if let Some(u) = user {
            chown(u, dir.path());
        }
        let extra = [
            "--policy",
            policy.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ];
        let (server, tokens) = WsServer::start_tenants(user, &["alice", "bob"], &extra);
        let mut a = server.connect_as(&tokens["alice"]).await;
        let mut b = server.connect_as(&tokens["bob"]).await;
        // max_sandboxes: Alice's third is refused; Bob makes three.
        let mut mine = Vec::new();
        for _ in 0..2 {
            let r = a.call("sandbox.create", spec()).await;
            mine.push(result_of(&r)["sandbox_id"].as_str().unwrap().to_owned());
        }
        let r = a.call("sandbox.create", spec()).await;
        assert_eq!(error_code(&r), OVER_CAPACITY, "{user:?}: {r}");
        assert_eq!(kind_of(&r), "TenantMaxSandboxes", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("tenant alice holds 2 live sandboxes"),
            "{r}"
        );
        let mut his = Vec::new();
        for _ in 0..3 {
            let r = b.call("sandbox.create", spec()).await;
            his.push(result_of(&r)["sandbox_id"].as_str().unwrap().to_owned());
        }
        // max_concurrent_runs: while Alice's run holds her one, her next is refused at once
        // and Bob's runs complete.
        let sleeping = a
            .request(
                "sandbox.run_code",
                json!({"sandbox_id": mine[0], "code": "import time\ntime.sleep(3)\nprint('slept')"}),
            )
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let r = a
            .call(
                "sandbox.run_code",
                json!({"sandbox_id": mine[1], "code": "print(1)"}),
            )
            .await;
        assert_eq!(error_code(&r), OVER_CAPACITY, "{user:?}: {r}");
        assert_eq!(kind_of(&r), "TenantMaxConcurrentRuns", "{r}");
        for sid in &his {
            let out = run(&mut b, sid, "print('bob ran')").await;
            assert_eq!(out["stdout"], "bob ran\n", "{user:?}: {out}");
        }
        let (r, _) = a.wait_for(sleeping, &no_tools).await;
        assert_eq!(result_of(&r)["stdout"], "slept\n", "{r}");
        let out = run(&mut a, &mine[1], "print('my turn')").await;
        assert_eq!(out["stdout"], "my turn\n", "{user:?}: {out}");
        // max_snapshots: Alice keeps one; Bob is not counted against her.
        result_of(
            &a.call("sandbox.snapshot", json!({"sandbox_id": mine[0]}))
                .await,
        );
        let r = a
            .call("sandbox.snapshot", json!({"sandbox_id": mine[1]}))
            .await;
        assert_eq!(error_code(&r), OVER_CAPACITY, "{user:?}: {r}");
        assert_eq!(kind_of(&r), "TenantMaxSnapshots", "{r}");
        result_of(
            &b.call("sandbox.snapshot", json!({"sandbox_id": his[0]}))
                .await,
        );
        result_of(
            &b.call("sandbox.snapshot", json!({"sandbox_id": his[1]}))
                .await,
        );
        // The egress ceiling: a host past it is refused by name; nothing is made.
        result_of(
            &a.call("sandbox.dispose", json!({"sandbox_id": mine[1]}))
                .await,
        );
        let asks = json!({"spec": {"egress": "allowlist",
                                   "egress_allow": ["pypi.org:443", "evil.example.com"]}});
        let r = a.call("sandbox.create", asks).await;
        assert_eq!(error_code(&r), -32007, "{user:?}: {r}");
        assert_eq!(kind_of(&r), "TenantEgressNotPermitted", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("\"evil.example.com\""),
            "{r}"
        );
        let listed = a.call("sandbox.list", json!({})).await;
        assert_eq!(result_of(&listed)["sandboxes"].as_array().unwrap().len(), 1);
    }
}
