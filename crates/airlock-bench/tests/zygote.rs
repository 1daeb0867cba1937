//! The zygote's guarantees, against the real executor: every run is a fresh process with
//! exactly a cold run's layers (the attacks of the pool suite, run through the zygote), no
//! interpreter state crosses runs, what a fork would share is re-seeded or documented, and
//! nothing survives the zygote or a killed run. Run as root and as `airlock-test`.
mod common;

use common::{completed, executor, spec};
use std::time::{Duration, Instant};

use airlock_broker::{NoTools, RunResult, RunSpec, RunStatus, Workload, Zygote, ZygoteConfig};
use serde_json::Value;

/// One test at a time: the process checks look for every process with the zygote's command
/// line, which every zygote of this binary shares.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Serial {
    zygote: Zygote,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl std::ops::Deref for Serial {
    type Target = Zygote;
    fn deref(&self) -> &Zygote {
        &self.zygote
    }
}

impl Serial {
    async fn shutdown(self) {
        self.zygote.shutdown().await;
    }
}

async fn zygote() -> Serial {
    let turn = SERIAL.lock().await;
    match Zygote::start(ZygoteConfig::new(executor())).await {
        Ok(zygote) => Serial {
            zygote,
            _turn: turn,
        },
        Err(e) => panic!("zygote: {e}"),
    }
}

/// Run through the zygote, and check that it was the zygote that forked the stage.
async fn forked(z: &Zygote, spec: RunSpec) -> RunResult {
    let before = z.stats().forked_runs;
    let r = z.run(spec, &NoTools).await;
    assert_eq!(z.stats().forked_runs, before + 1, "not forked: {r:#?}");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_run_prints_and_reports_its_exit() {
    let z = zygote().await;
    assert_eq!(completed(&forked(&z, spec("print(1)")).await), "1\n");
    let r = forked(
        &z,
        spec("import sys\nprint('x', file=sys.stderr)\nsys.exit(3)"),
    )
    .await;
    assert_eq!(
        (r.status, r.exit_code, r.stderr.as_str()),
        (RunStatus::Error, Some(3), "x\n")
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_state_crosses_runs() {
    let z = zygote().await;
    // Interpreter state (builtins, loaded modules, the bootstrap's own counters), files and
    // the work dir are all the run's own; the guest is pid 1 with no parent in its namespace.
    let code = "import builtins, os, sys, json\n\
                print(json.dumps([os.getcwd(), sorted(os.listdir('.')), hasattr(builtins, 'LEFT_BEHIND'), \
                'LEFT_BEHIND' in sys.modules, os.getpid(), os.getppid()]))\n\
                open('left-behind', 'w').write('x')\nbuiltins.LEFT_BEHIND = 1\n\
                sys.modules['LEFT_BEHIND'] = sys\ncall_tool.__globals__['_next_id'][0] = 10**6";
    for _ in 0..3 {
        let r = forked(&z, spec(code)).await;
        let v: Value = serde_json::from_str(completed(&r).trim()).unwrap();
        assert_eq!(
            v,
            serde_json::json!(["/work", [], false, false, 1, 0]),
            "{v}"
        );
    }
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_run_passes_the_isolation_checks() {
    let z = zygote().await;
    common::isolation_attacks(|s| forked(&z, s), "zygote").await;
    z.shutdown().await;
}

/// The namespace links of `pid` as the host sees them.
fn namespaces_of(pid: i32) -> Vec<String> {
    ["user", "mnt", "net", "ipc", "uts", "pid", "cgroup"]
        .iter()
        .map(|ns| {
            std::fs::read_link(format!("/proc/{pid}/ns/{ns}"))
                .map(|l| l.display().to_string())
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_each_get_their_own_namespaces_none_of_the_zygotes() {
    let z = zygote().await;
    let zygote_ns = namespaces_of(z.pid().await);
    let own_ns = namespaces_of(i32::try_from(std::process::id()).unwrap());
    assert_eq!(zygote_ns, own_ns, "the zygote itself is not namespaced");
    // Two runs alive at the same moment (each waits for the other's file... they cannot see
    // each other, so each just lives long enough) report their namespaces from inside.
    let code = "import os, time\nprint(' '.join(os.readlink('/proc/self/ns/' + n) for n in ['user', 'mnt', 'net', 'ipc', 'uts', 'pid', 'cgroup']))\ntime.sleep(0.5)";
    let (a, b) = tokio::join!(z.run(spec(code), &NoTools), z.run(spec(code), &NoTools));
    assert_eq!(z.stats().forked_runs, 2);
    let a: Vec<String> = completed(&a).split_whitespace().map(String::from).collect();
    let b: Vec<String> = completed(&b).split_whitespace().map(String::from).collect();
    assert_eq!((a.len(), b.len()), (7, 7), "{a:?} {b:?}");
    for i in 0..7 {
        // cgroup namespace ids are compared too: each run unshares its own.
        assert_ne!(
            a[i], zygote_ns[i],
            "run shares the zygote's namespace {}",
            a[i]
        );
        assert_ne!(a[i], b[i], "two live runs share namespace {}", a[i]);
        assert_ne!(
            b[i], zygote_ns[i],
            "run shares the zygote's namespace {}",
            b[i]
        );
    }
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_state_is_fresh_per_run_and_the_hash_secret_is_the_zygotes() {
    let z = zygote().await;
    // The zygote never imported `random`; each run seeds it from the kernel. The str hash
    // secret is fixed at interpreter start: shared by the zygote's runs (documented).
    let code = "import sys\nfresh = 'random' not in sys.modules\nimport random, os\nprint(fresh, random.random(), os.urandom(8).hex(), hash('airlock'))";
    let mut seen = Vec::new();
    for _ in 0..3 {
        let r = forked(&z, spec(code)).await;
        let f: Vec<String> = completed(&r).split_whitespace().map(String::from).collect();
        assert_eq!(f[0], "True", "the zygote had imported random: {f:?}");
        seen.push(f);
    }
    for (i, a) in seen.iter().enumerate() {
        for b in &seen[i + 1..] {
            assert_ne!(a[1], b[1], "random repeated across runs");
            assert_ne!(a[2], b[2], "urandom repeated across runs");
            assert_eq!(a[3], b[3], "the hash secret differs: not one zygote?");
        }
    }
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_travels_with_execute_and_nothing_else_is_inherited() {
    std::env::set_var("AIRLOCK_ZYGOTE_TEST_SECRET", "broker-secret");
    let z = zygote().await;
    let mut s = spec(
        "import os\nenv = dict(os.environ)\nenv.pop('LC_CTYPE', None)\nprint(sorted(env.items()))",
    );
    s.env = vec![
        ("VISIBLE".into(), "yes".into()),
        ("OTHER".into(), "2".into()),
    ];
    let out = completed(&forked(&z, s).await).to_string();
    assert_eq!(out, "[('OTHER', '2'), ('VISIBLE', 'yes')]\n");
    z.shutdown().await;
}

/// Live (not zombie) processes whose command line is exactly the zygote's: the zygote and
/// every process of its runs (a fork keeps its parent's command line).
fn zygote_family(zygote: i32) -> Vec<i32> {
    let cmdline = |pid: &str| std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let theirs = cmdline(&zygote.to_string());
    assert!(!theirs.is_empty(), "the zygote is gone");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Ok(pid) = name.parse::<i32>() {
            if cmdline(&name) == theirs && live(pid) {
                pids.push(pid);
            }
        }
    }
    pids
}

fn live(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty()
        && !stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_run_is_killed_and_nothing_of_it_survives() {
    let z = zygote().await;
    let zpid = z.pid().await;
    let mut s = spec("import time\nprint('spinning', flush=True)\ntry:\n    while True:\n        pass\nfinally:\n    time.sleep(30)");
    s.limits.timeout = Duration::from_millis(500);
    let t0 = Instant::now();
    let r = forked(&z, s).await;
    assert_eq!(
        (r.status, r.stdout.as_str()),
        (RunStatus::Timeout, "spinning\n"),
        "{r:#?}"
    );
    assert!(t0.elapsed() >= Duration::from_millis(500));
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the run's finally outlived its kill"
    );
    assert_eq!(
        zygote_family(zpid),
        vec![zpid],
        "a process of the run survived"
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cannot_reach_the_zygote_and_a_dead_zygote_is_restarted() {
    let z = zygote().await;
    let zpid = z.pid().await;
    // From inside, the zygote's host pid names nothing the run can signal, and it has no
    // parent to reach; the zygote lives on.
    let code = format!(
        "import os, signal\nprint(os.getppid())\ntry:\n    os.kill({zpid}, signal.SIGKILL); print('SIGNALLED')\nexcept OSError as e:\n    print('denied')"
    );
    let out = completed(&forked(&z, spec(&code)).await).to_string();
    assert_eq!(out, "0\ndenied\n");
    assert!(live(zpid), "a run killed the zygote");
    // A zygote that died (killed from outside) is replaced before the next run.
    airlock_jail::process::kill(zpid, 9).unwrap();
    while live(zpid) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(completed(&forked(&z, spec("print(2)")).await), "2\n");
    assert_eq!(z.stats().restarts, 1);
    assert_ne!(z.pid().await, zpid);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_the_zygote_cannot_fork_go_exec_per_run() {
    let z = zygote().await;
    let mut s = spec("");
    s.workload = Workload::Command {
        argv: vec!["/bin/echo".into(), "exec".into()],
    };
    let r = z.run(s, &NoTools).await;
    assert_eq!(completed(&r), "exec\n");
    let stats = z.stats();
    assert_eq!((stats.exec_runs, stats.forked_runs), (1, 0), "{stats:?}");
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_survives_the_zygote() {
    let z = zygote().await;
    let zpid = z.pid().await;
    assert_eq!(completed(&forked(&z, spec("print(1)")).await), "1\n");
    drop(z);
    let until = Instant::now() + Duration::from_secs(5);
    while live(zpid) {
        assert!(Instant::now() < until, "the zygote outlived its handle");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zygote_holds_no_descriptor_of_a_finished_run() {
    let z = zygote().await;
    let zpid = z.pid().await;
    let fds = || {
        std::fs::read_dir(format!("/proc/{zpid}/fd"))
            .unwrap()
            .count()
    };
    assert_eq!(completed(&forked(&z, spec("print(1)")).await), "1\n");
    let before = fds();
    for _ in 0..5 {
        assert_eq!(completed(&forked(&z, spec("print(1)")).await), "1\n");
    }
    assert_eq!(fds(), before, "the zygote kept descriptors of its runs");
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_run_reports_like_a_cold_one() {
    let z = zygote().await;
    // The program's traceback (no bootstrap or zygote frames), its exit status and its
    // output are those of the exec-per-run path, byte for byte.
    let code = "import sys\nprint('out')\ndef f():\n    raise ValueError('boom')\nf()";
    let cold = airlock_broker::run(spec(code), &NoTools).await;
    let warm = forked(&z, spec(code)).await;
    assert_eq!(cold.status, RunStatus::Error);
    assert!(cold.stderr.contains("ValueError: boom"), "{cold:#?}");
    assert_eq!(
        (&warm.status, &warm.exit_code, &warm.stdout, &warm.stderr),
        (&cold.status, &cold.exit_code, &cold.stdout, &cold.stderr)
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_fed_by_the_zygote_serves_each_executor_once_with_every_layer() {
    // The turn is held to the end: this test's processes share the zygote command line.
    let Serial { zygote, _turn } = zygote().await;
    let z = std::sync::Arc::new(zygote);
    let mut config = airlock_broker::PoolConfig::new(2, executor());
    config.zygote = Some(std::sync::Arc::clone(&z));
    let pool = airlock_broker::Pool::start(config);
    let code = "import builtins, os\nst = open('/proc/self/status').read()\nprint(sorted(os.listdir('.')), hasattr(builtins, 'LEFT'), os.getpid(), 'Seccomp:\\t2' in st, 'NoNewPrivs:\\t1' in st)\nopen('m', 'w').write('x')\nbuiltins.LEFT = 1";
    for _ in 0..3 {
        assert!(
            pool.wait_full(Duration::from_secs(30)).await,
            "{:?}",
            pool.stats()
        );
        let r = pool.run(spec(code), &NoTools).await;
        assert_eq!(completed(&r), "[] False 1 True True\n");
    }
    let stats = pool.stats();
    assert_eq!(stats.warm_runs, 3, "{stats:?}");
    assert!(
        z.stats().forked_runs >= 3,
        "executors not forked: {:?}",
        z.stats()
    );
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_run_is_in_its_cgroups_from_the_start_and_held_to_its_memory_limit() {
    let z = zygote().await;
    // As root the run has cgroups (entered by the child as it was born); without them (an
    // unprivileged broker here) the RSS watchdog enforces the same limit.
    let probe = forked(&z, spec("print(1)")).await;
    let root = airlock_jail::identity::effective_root();
    assert_eq!(
        probe.enforcement.contains(&"cgroup"),
        root,
        "{:?}",
        probe.enforcement
    );
    let mut s = spec("blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))");
    s.limits.memory_bytes = 96 << 20;
    let r = forked(&z, s).await;
    assert_eq!(r.status, RunStatus::MemoryLimit, "{r:#?}");
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_from_another_build_is_refused_at_start() {
    let _turn = SERIAL.lock().await;
    let mut config = ZygoteConfig::new(executor());
    config.expected_build = Some(airlock_executor::zygote::build() ^ 1);
    match Zygote::start(config).await {
        Ok(_) => panic!("a zygote started on a library from another build"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("built from other sources"), "{msg}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zygote_that_answers_too_late_is_replaced_and_later_runs_are_not_given_its_stale_answer()
{
    let z = zygote().await;
    let zpid = z.pid().await;
    assert_eq!(completed(&forked(&z, spec("print(0)")).await), "0\n");
    // The zygote stalls (stopped from outside: a loaded host, swap) for longer than the
    // broker waits for its answer: that run cannot start...
    airlock_jail::process::kill(zpid, 19 /* SIGSTOP */).unwrap();
    let stalled = z.run(spec("print(1)"), &NoTools).await;
    assert_ne!(stalled.status, RunStatus::Completed, "{stalled:#?}");
    // ...and when it resumes, the request the broker gave up on must not be answered to the
    // next one: each later run is its own stage, and completes.
    let _ = airlock_jail::process::kill(zpid, 18 /* SIGCONT */);
    for i in 2..5 {
        let r = forked(&z, spec(&format!("print({i})"))).await;
        assert_eq!(
            (r.status, r.stdout.as_str()),
            (RunStatus::Completed, format!("{i}\n").as_str()),
            "run {i} after the stall: {r:#?}"
        );
    }
    assert_eq!(z.stats().restarts, 1, "the stalled zygote was not replaced");
    assert!(!live(zpid), "the stalled zygote still runs");
    z.shutdown().await;
}

/// Field `n` (1-based, after the command name) of `/proc/<pid>/stat`.
fn stat_field(pid: i32, n: usize) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(n - 1)?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_run_is_a_process_group_of_its_own_never_the_zygotes() {
    let z = zygote().await;
    let zpid = z.pid().await;
    // A guest signals "its process group" (kill(0, ..)). A spawned stage leads a group of its
    // own; a forked one must too: in the zygote's group, the signal would reach the zygote and
    // every other run's stage, stopped only by Landlock's signal scope (ABI 6, Linux 6.12) or,
    // under a root broker, by the uid (under a non-root one the runs share the broker's).
    let attacker = "import os, signal, time\ntime.sleep(0.3)\nos.kill(0, signal.SIGUSR1)\ntime.sleep(0.3)\nprint('sent')";
    let other = "import time\ntime.sleep(1.5)\nprint('other run done')";
    let look = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        // The host's view of both runs' processes while they live: the stages (the broker's
        // children) and what they forked.
        let me = i32::try_from(std::process::id()).unwrap();
        let mut seen = Vec::new();
        for pid in zygote_family(zpid).into_iter().filter(|p| *p != zpid) {
            let (ppid, pgrp) = (stat_field(pid, 2), stat_field(pid, 3));
            seen.push((pid, ppid, pgrp));
        }
        (me, seen)
    };
    let (a, b, (me, seen)) = tokio::join!(
        z.run(spec(attacker), &NoTools),
        z.run(spec(other), &NoTools),
        look
    );
    let stages: Vec<_> = seen
        .iter()
        .filter(|(_, ppid, _)| *ppid == Some(me))
        .collect();
    assert_eq!(
        stages.len(),
        2,
        "both stages, the broker's children: {seen:?}"
    );
    for (pid, _, pgrp) in &seen {
        assert_ne!(
            *pgrp,
            Some(zpid),
            "{pid} is in the zygote's process group: {seen:?}"
        );
    }
    for (pid, _, pgrp) in stages {
        assert_eq!(
            *pgrp,
            Some(*pid),
            "stage {pid} leads no group of its own: {seen:?}"
        );
    }
    assert_eq!(completed(&a), "sent\n");
    assert_eq!(completed(&b), "other run done\n");
    assert!(live(zpid), "the signal reached the zygote");
    z.shutdown().await;
}
