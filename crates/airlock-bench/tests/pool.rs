//! The warm pool's guarantees, against the real executor: each pooled executor serves one run,
//! a pooled run is as isolated as a cold one (a few of the attack programs, run warm), runs
//! that do not fit go cold, and nothing survives the pool.
mod common;

use common::{completed, executor, spec};
use std::time::{Duration, Instant};

use airlock_broker::{NoTools, Pool, PoolConfig, RunResult, RunSpec, RunStatus};
use serde_json::Value;

async fn pool(size: usize) -> Pool {
    let pool = Pool::start(PoolConfig::new(size, executor()));
    assert!(
        pool.wait_full(Duration::from_secs(30)).await,
        "pool did not fill: {:?}",
        pool.stats()
    );
    pool
}

/// Run warm: wait until an executor is ready so the run cannot fall back to cold.
async fn warm(pool: &Pool, spec: RunSpec) -> RunResult {
    assert!(pool.fits(&spec));
    assert!(
        pool.wait_full(Duration::from_secs(30)).await,
        "{:?}",
        pool.stats()
    );
    let before = pool.stats().warm_runs;
    let r = pool.run(spec, &NoTools).await;
    assert_eq!(
        pool.stats().warm_runs,
        before + 1,
        "the run was not served warm"
    );
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pooled_executor_serves_exactly_one_run() {
    let pool = pool(2).await;
    // Each run sees a fresh work dir and a fresh interpreter: nothing a previous run left
    // behind (a file, interpreter state) is visible. (Namespace inode numbers are recycled by
    // the kernel once a namespace is freed, so they cannot tell runs apart.)
    let code =
        "import builtins, os, json\nprint(json.dumps([os.getcwd(), sorted(os.listdir('.')), \
                hasattr(builtins, 'LEFT_BEHIND')]))\nopen('left-behind', 'w').write('x')\n\
                builtins.LEFT_BEHIND = 1";
    for _ in 0..4 {
        let r = warm(&pool, spec(code)).await;
        let v: Value = serde_json::from_str(completed(&r).trim()).unwrap();
        assert_eq!(
            v[1],
            serde_json::json!([]),
            "the work dir was not fresh: {v}"
        );
        assert_eq!(v[2], false, "interpreter state survived a run: {v}");
        assert_eq!(v[0], "/work", "{v}");
    }
    let stats = pool.stats();
    assert_eq!(stats.warm_runs, 4);
    assert!(stats.started >= 4, "{stats:?}");
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_run_passes_the_isolation_checks() {
    let pool = pool(1).await;
    common::isolation_attacks(|s| warm(&pool, s), "pool").await;
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_travels_with_execute_and_nothing_else_is_inherited() {
    std::env::set_var("AIRLOCK_POOL_TEST_SECRET", "broker-secret");
    let pool = pool(1).await;
    let mut s = spec(
        "import os\nenv = dict(os.environ)\nenv.pop('LC_CTYPE', None)\nprint(sorted(env.items()))",
    );
    s.env = vec![
        ("VISIBLE".into(), "yes".into()),
        ("OTHER".into(), "2".into()),
    ];
    let out = completed(&warm(&pool, s).await).to_string();
    assert_eq!(out, "[('OTHER', '2'), ('VISIBLE', 'yes')]\n");
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_run_is_timed_from_assignment_and_killed_on_timeout() {
    let pool = pool(1).await;
    // Let the executor idle longer than the run's whole budget: idle time must not count.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut s = spec("print('spinning', flush=True)\nwhile True:\n    pass");
    s.limits.timeout = Duration::from_millis(500);
    let t0 = Instant::now();
    let r = warm(&pool, s).await;
    assert_eq!(r.status, RunStatus::Timeout, "{r:#?}");
    assert_eq!(r.stdout, "spinning\n");
    assert!(t0.elapsed() >= Duration::from_millis(500));
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_that_does_not_fit_runs_cold() {
    let pool = pool(1).await;
    let mut s = spec("import os\nos.makedirs('/work/sub', exist_ok=True)\nprint(os.getcwd())");
    s.cwd = Some("sub".into());
    assert!(!pool.fits(&s));
    let r = pool.run(s, &NoTools).await;
    // The directory does not exist when the run starts: `not_found`, before anything spawns.
    assert_eq!(r.status, RunStatus::Error, "{r:#?}");
    let error = r.error.as_ref().expect("an error");
    assert_eq!(error.code, -32016, "not_found: {r:#?}");
    let mut s = spec("print(1)");
    s.limits.memory_bytes /= 2;
    assert_eq!(completed(&pool.run(s, &NoTools).await), "1\n");
    let stats = pool.stats();
    assert_eq!((stats.cold_runs, stats.warm_runs), (2, 0), "{stats:?}");
    pool.shutdown().await;
}

/// The stage pids of `pool`'s idle executors and every process under them.
fn trees(pool: &Pool) -> Vec<i32> {
    let stages = pool.idle_stage_pids();
    let mut all = stages.clone();
    for s in stages {
        all.extend(airlock_jail::procfs::descendants(s));
    }
    all
}

/// Whether `pid` is a live (not zombie) process.
fn live(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty()
        && !stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_survives_dropping_the_pool() {
    let pool = pool(3).await;
    let pids = trees(&pool);
    assert!(
        pids.len() >= 6,
        "expected a stage and a guest per executor: {pids:?}"
    );
    assert!(pids.iter().all(|p| live(*p)));
    drop(pool);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|p| live(*p)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "processes survived the pool: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_reaps_every_idle_executor() {
    let pool = pool(2).await;
    let pids = trees(&pool);
    pool.shutdown().await;
    // pid 1 of a run may stay a zombie for a moment (reaped by the host's init once its stage
    // is gone); none may still run.
    let left: Vec<i32> = pids.iter().copied().filter(|p| live(*p)).collect();
    assert!(left.is_empty(), "still running after shutdown: {left:?}");
}
