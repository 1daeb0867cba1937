//! Bounded load tests of `airlock serve` on loopback, one at a time (each measures the machine
//! alone):
//!
//! - `execute`: 50 concurrent WebSocket connections x 20 runs each (every fifth a Python run
//!   with tool calls, the rest commands);
//! - sessions, the figures, on a server with 4 run slots: 8 sandboxes x 10 runs over
//!   one connection, and 50 sandboxes over 10 connections x 20 runs each. Their speed is
//!   `airlock bench`'s "session load" row: these hold under any load and assert what is
//!   correct, not how fast.
//!
//! Every request gets exactly one terminal response carrying its own data, no run is refused
//! `over_capacity` (over the slots a run queues), every result says how it was served (`via`:
//! Python forked from the zygote, commands exec'd) and how long it queued (`queued_ms`), and
//! nothing leaks: no run processes (the server's zygote is its own), no server fds, no run
//! dirs, no run cgroups.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed step is a failed test"
)]
#[path = "serve/support.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

const CONNECTIONS: usize = 50;
const RUNS: usize = 20;

/// One load test at a time: each is the machine's only load (2 cores), so its latencies are
/// its own and the cgroup and process probes see only its server.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A run's result says how its process came to be and how long it waited for a slot.
fn assert_served(result: &Value, python: bool) {
    let want = if python { "zygote" } else { "exec" };
    assert_eq!(result["via"], want, "{result}");
    let queued = result["queued_ms"].as_f64();
    assert!(queued.is_some_and(|q| q >= 0.0), "queued_ms: {result}");
}

/// Samples `server`'s run cgroups every 50 ms until `stop`; the most seen at once beyond
/// `before` (proof the probe finds them while runs are alive).
fn sample_run_cgroups(
    server: i32,
    before: BTreeSet<PathBuf>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut most = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            most = most.max(run_cgroups(server).difference(&before).count());
            std::thread::sleep(Duration::from_millis(50));
        }
        most
    })
}

/// Wait (bounded: their removal is off the run's path) until `server`'s run cgroups are only
/// those of `before`; returns the ones left.
async fn cgroups_gone(server: i32, before: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<PathBuf> = run_cgroups(server).difference(before).cloned().collect();
        if left.is_empty() || Instant::now() > end {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn one_connection(server_url: String, token: String, conn: usize) -> Vec<String> {
    let mut req =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(server_url)
            .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut c = WsClient::new(ws);
    let mut run_ids = Vec::new();
    for run in 0..RUNS {
        let id = (conn * 1000 + run) as i64;
        let resp = if run % 5 == 0 {
            let code = format!(
                "a = call_tool('echo', {{'conn': {conn}, 'run': {run}}})\nb = call_tool('add', {{'a': a['run'], 'b': 1}})\nprint(a['conn'], b)"
            );
            let r = c.execute(id, json!({"code": code}), &echo_tools).await;
            assert_eq!(
                result_of(&r)["stdout"],
                format!("{conn} {}\n", run + 1),
                "{r}"
            );
            assert_served(result_of(&r), true);
            r
        } else {
            let r = c
                .execute(
                    id,
                    json!({"argv": ["/bin/echo", format!("c{conn}r{run}")]}),
                    &echo_tools,
                )
                .await;
            assert_eq!(result_of(&r)["stdout"], format!("c{conn}r{run}\n"), "{r}");
            assert_served(result_of(&r), false);
            r
        };
        assert_eq!(resp["id"], id);
        assert_eq!(result_of(&resp)["status"], "completed", "{resp}");
        run_ids.push(result_of(&resp)["run_id"].as_str().unwrap().to_string());
    }
    // Nothing more may arrive for this connection: close and read to the end.
    c.ws.close(None).await.unwrap();
    let (extra, _) = c.recv_until_close().await;
    assert!(extra.is_empty(), "conn {conn}: stray messages {extra:?}");
    run_ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn load_50_connections_x_20_runs_leak_nothing() {
    let _serial = SERIAL.lock().await;
    let server = WsServer::start(&[]);
    let pid = server.pid();
    // Warm up (the interpreter probe, tokio's child reaper) so the fd baseline is stable.
    let mut warm = server.connect().await;
    let r = warm
        .execute(
            1,
            json!({"code": "print(call_tool('echo', 1))"}),
            &echo_tools,
        )
        .await;
    assert_eq!(result_of(&r)["stdout"], "1\n");
    drop(warm);
    assert!(settle(pid, Duration::from_secs(10)).is_empty());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fds_before = fd_count(pid);
    let cgroups_before = run_cgroups(pid);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cgroup_sampler = sample_run_cgroups(pid, cgroups_before.clone(), stop.clone());

    let started = Instant::now();
    let mut tasks = Vec::new();
    for conn in 0..CONNECTIONS {
        tasks.push(tokio::spawn(one_connection(
            server.url(),
            server.token.clone(),
            conn,
        )));
    }
    let mut all = BTreeSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(all.insert(id.clone()), "run id {id} reused");
        }
    }
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let cgroups_seen = cgroup_sampler.join().unwrap();
    assert_eq!(all.len(), CONNECTIONS * RUNS);
    assert!(took < Duration::from_secs(100), "load took {took:?}");

    let left = settle(pid, Duration::from_secs(10));
    assert!(left.is_empty(), "processes left: {left:?}");
    assert!(executors(pid).is_empty());
    assert!(server.run_dirs().is_empty(), "{:?}", server.run_dirs());
    let cgroups_left = cgroups_gone(pid, &cgroups_before).await;
    assert!(
        cgroups_left.is_empty(),
        "run cgroups left: {cgroups_left:?}"
    );
    assert!(
        cgroups_seen > 0 || !cgroups_writable(pid),
        "no run cgroup of the server was ever seen: the probe looks in the wrong place"
    );
    let end = Instant::now() + Duration::from_secs(10);
    while fd_count(pid) > fds_before && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        fd_count(pid),
        fds_before,
        "server fds leaked: {:?}",
        fd_list(pid)
    );
    let audit = server.audit();
    assert_eq!(audit.len(), CONNECTIONS * RUNS + 1);
    let audited: BTreeSet<String> = audit
        .iter()
        .map(|a| a["run_id"].as_str().unwrap().to_string())
        .collect();
    assert!(all.is_subset(&audited));
    eprintln!(
        "load: {} runs in {took:?}; run cgroups at most {cgroups_seen} at once, none left",
        CONNECTIONS * RUNS
    );
}

// ---- sandboxes that persist, over the session methods: 8 sandboxes x 10 runs over one
// connection, and 50 sandboxes over 10 connections x 20 runs, each on 4 run slots ----

mod sessions {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use serde_json::{json, Value};

    use super::support::session_probes::*;
    use super::support::*;
    use super::{
        assert_served, cgroups_gone, cgroups_writable, run_cgroups, sample_run_cgroups, SERIAL,
    };

    /// Run slots: on 2 cores more only queue in the kernel instead of the server.
    const SLOTS: &str = "4";

    /// Every run's latency (request sent to result received) and time queued for a slot, ms.
    type Latencies = Arc<Mutex<Vec<(f64, f64)>>>;

    fn spec() -> Value {
        json!({"spec": {
            "requires": ["run_code", "exec", "files_in", "files_out", "files_list", "host_tools"],
            "limits": {"timeout_s": 60},
            "tools": [{
                "name": "add", "description": "a + b",
                "schema": {"type": "object", "required": ["a", "b"], "additionalProperties": false,
                           "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
                "source": null, "sink": null, "identity": null}]}})
    }

    fn add(name: &str, args: &Value) -> Result<Value, (i64, String)> {
        match name {
            "add" => Ok(json!(
                args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()
            )),
            _ => Err((-32013, format!("no tool {name}"))),
        }
    }

    /// Run 4k: Python, streamed, one tool call, reads the file the orchestrator wrote.
    fn python_streamed(g: usize, r: usize) -> (Value, String) {
        let code = format!(
            "n = call_tool('add', {{'a': {g}, 'b': {r}}})\n\
             open('log.txt', 'a').write('r{r}\\n')\n\
             for i in range(40):\n    print('g{g} r{r} line', i, 'x' * 100)\n\
             print(n, open('in.txt').read().strip())"
        );
        let mut want: String = (0..40)
            .map(|i| format!("g{g} r{r} line {i} {}\n", "x".repeat(100)))
            .collect();
        want.push_str(&format!("{} sandbox {g}\n", g + r));
        (json!({"code": code, "stream": true}), want)
    }

    /// Run 4k+1: a streamed command.
    fn command_streamed(g: usize, r: usize) -> (Value, String) {
        let sh = format!(
            "echo r{r} >> log.txt; i=0; while [ $i -lt 50 ]; do echo g{g} r{r} $i; i=$((i+1)); done"
        );
        let want = (0..50).map(|i| format!("g{g} r{r} {i}\n")).collect();
        (json!({"argv": ["/bin/sh", "-c", sh], "stream": true}), want)
    }

    /// Run 4k+2: a command over a file the orchestrator wrote; it writes one back.
    fn command_files(r: usize) -> (Value, String) {
        let sh =
            format!("echo r{r} >> log.txt; wc -c < chunk-{r}.bin; cp chunk-{r}.bin out-{r}.bin");
        (
            json!({"argv": ["/bin/sh", "-c", sh]}),
            format!("{}\n", chunk(r).len()),
        )
    }

    /// Run 4k+3: Python with two tool calls, not streamed.
    fn python_tools(g: usize, r: usize) -> (Value, String) {
        let code = format!(
            "open('log.txt', 'a').write('r{r}\\n')\n\
             print(call_tool('add', {{'a': {r}, 'b': call_tool('add', {{'a': {g}, 'b': 1000}})}}))"
        );
        (json!({"code": code}), format!("{}\n", r + g + 1000))
    }

    fn chunk(r: usize) -> Vec<u8> {
        (0..4096 + r * 97)
            .map(|i| (i * 31 + r).to_le_bytes()[0])
            .collect()
    }

    async fn write(c: &Mux, sid: &str, path: &str, data: &[u8]) {
        let w = c
            .call(
                "files.write",
                json!({"sandbox_id": sid, "path": path, "data": b64(data)}),
            )
            .await;
        assert_eq!(result_of(&w.msg)["size"], data.len(), "{}", w.msg);
    }

    async fn read(c: &Mux, sid: &str, path: &str) -> Vec<u8> {
        let r = c
            .call("files.read", json!({"sandbox_id": sid, "path": path}))
            .await;
        let v = result_of(&r.msg);
        assert_eq!(v["eof"], true, "{v}");
        unb64_text(v["data"].as_str().unwrap())
    }

    #[derive(Default)]
    struct Tally {
        runs: AtomicUsize,
        streamed_checked: AtomicUsize,
        dropped_runs: AtomicUsize,
        tool_calls: AtomicUsize,
    }

    /// One sandbox's life: create, `runs` runs with files in and out, check its files, dispose.
    async fn one_sandbox(c: Arc<Mux>, g: usize, runs: usize, lat: Latencies, tally: Arc<Tally>) {
        let created = c.call("sandbox.create", spec()).await;
        let sid = result_of(&created.msg)["sandbox_id"]
            .as_str()
            .unwrap()
            .to_string();
        write(&c, &sid, "in.txt", format!("sandbox {g}\n").as_bytes()).await;
        for r in 0..runs {
            let (mut params, want) = match r % 4 {
                0 => python_streamed(g, r),
                1 => command_streamed(g, r),
                2 => {
                    write(&c, &sid, &format!("chunk-{r}.bin"), &chunk(r)).await;
                    command_files(r)
                }
                _ => python_tools(g, r),
            };
            params["sandbox_id"] = json!(sid);
            let python = params.get("code").is_some();
            let method = if python {
                "sandbox.run_code"
            } else {
                "sandbox.exec"
            };
            let sent = Instant::now();
            // Over the server's run slots a run queues; `over_capacity` would mean the queue was
            // full or the run's deadline passed while it waited: neither may happen here.
            let reply = c.call(method, params.clone()).await;
            let took = sent.elapsed().as_secs_f64() * 1000.0;
            assert_ne!(
                reply.msg["error"]["code"], -32018,
                "g{g} r{r}: refused over capacity: {}",
                reply.msg
            );
            let res = result_of(&reply.msg);
            assert_eq!(res["status"], "completed", "g{g} r{r}: {}", reply.msg);
            assert_eq!(res["stdout"], want, "g{g} r{r}: {}", reply.msg);
            assert_eq!(res["sandbox_id"], sid);
            assert_served(res, python);
            lat.lock()
                .unwrap()
                .push((took, res["queued_ms"].as_f64().unwrap()));
            tally.runs.fetch_add(1, Ordering::Relaxed);
            tally
                .tool_calls
                .fetch_add(reply.tool_calls, Ordering::Relaxed);
            let expect_calls = [1, 0, 0, 2][r % 4];
            assert_eq!(reply.tool_calls, expect_calls, "g{g} r{r}");
            if params["stream"] == true {
                let dropped = res["output_dropped_bytes"]
                    .as_u64()
                    .expect("a streamed run counts drops");
                if dropped == 0 {
                    assert_eq!(
                        reply.streamed("stdout"),
                        want,
                        "g{g} r{r}: streamed != stdout"
                    );
                    tally.streamed_checked.fetch_add(1, Ordering::Relaxed);
                } else {
                    tally.dropped_runs.fetch_add(1, Ordering::Relaxed);
                    // Whole chunks were dropped: what came plus what was counted is all of it.
                    let got = reply.streamed("stdout").len() + reply.streamed("stderr").len();
                    assert_eq!(got as u64 + dropped, want.len() as u64, "g{g} r{r}");
                }
            } else {
                assert!(
                    reply.outputs.is_empty(),
                    "g{g} r{r}: notifications unasked: {:?}",
                    reply.outputs
                );
            }
            if r % 4 == 2 {
                assert_eq!(
                    read(&c, &sid, &format!("out-{r}.bin")).await,
                    chunk(r),
                    "g{g} r{r}"
                );
            }
        }
        // Files persist across the sandbox's runs: every run appended its line.
        let log: String = (0..runs).map(|r| format!("r{r}\n")).collect();
        assert_eq!(
            String::from_utf8(read(&c, &sid, "log.txt").await).unwrap(),
            log,
            "g{g}"
        );
        assert_eq!(
            read(&c, &sid, "in.txt").await,
            format!("sandbox {g}\n").into_bytes()
        );
        let d = c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
        assert_eq!(result_of(&d.msg)["disposal"], Value::Null, "{}", d.msg);
    }

    /// The shape of one session load.
    #[derive(Clone, Copy)]
    struct Load {
        conns: usize,
        per_conn: usize,
        runs: usize,
    }

    async fn one_connection(
        server: Arc<WsServer>,
        conn: usize,
        load: Load,
        lat: Latencies,
        tally: Arc<Tally>,
    ) {
        let tools: SharedTools = Arc::new(add);
        let c = Arc::new(Mux::new(server.connect().await.ws, tools));
        let mut tasks = Vec::new();
        for j in 0..load.per_conn {
            let g = conn * load.per_conn + j;
            tasks.push(tokio::spawn(one_sandbox(
                Arc::clone(&c),
                g,
                load.runs,
                lat.clone(),
                tally.clone(),
            )));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let c = Arc::try_unwrap(c).ok().expect("every sandbox task is done");
        let strays = c.close().await;
        assert!(
            strays.is_empty(),
            "conn {conn}: messages that were no one's response: {strays:?}"
        );
    }

    /// The `pct`th percentile of sorted figures.
    fn percentile(sorted: &[f64], pct: usize) -> f64 {
        sorted[(sorted.len() - 1) * pct / 100]
    }

    /// A warm-up sandbox: the interpreter probe, the reaper, the first tmpfs, so the
    /// baselines below are steady.
    async fn warm_up(server: &WsServer) {
        let c = Mux::new(server.connect().await.ws, Arc::new(add));
        let created = c.call("sandbox.create", spec()).await;
        let sid = result_of(&created.msg)["sandbox_id"]
            .as_str()
            .unwrap()
            .to_string();
        let (mut p, want) = python_tools(0, 0);
        p["sandbox_id"] = json!(sid);
        let r = c.call("sandbox.run_code", p).await;
        assert_eq!(result_of(&r.msg)["stdout"], want);
        c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
        assert!(c.close().await.is_empty());
    }

    /// Run `load` against a fresh server with [`SLOTS`] run slots, check that every run
    /// completed as asked and nothing leaked, print the figures.
    async fn session_load(load: Load) {
        let _serial = SERIAL.lock().await;
        // 50 sandboxes of the default bounds may hold more than this host's default
        // admission budget; they hold a few KiB each, and the budget is not what is measured.
        let server = Arc::new(WsServer::start(&[
            "--memory-budget-mb",
            "1048576",
            "--max-sandboxes",
            "64",
            "--max-concurrent-runs",
            SLOTS,
        ]));
        let pid = server.pid();
        warm_up(&server).await;
        assert!(settle(pid, Duration::from_secs(10)).is_empty());
        tokio::time::sleep(Duration::from_millis(500)).await;
        let fds_before = fd_count(pid);
        let rss_before = rss_kib(pid);
        let cgroups_before = run_cgroups(pid);

        // Sample the server's RSS and run cgroups while the load runs.
        let stop = Arc::new(AtomicBool::new(false));
        let cgroup_sampler = sample_run_cgroups(pid, cgroups_before.clone(), Arc::clone(&stop));
        let sampler = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut peak = 0;
                while !stop.load(Ordering::Relaxed) {
                    peak = peak.max(rss_kib(pid));
                    std::thread::sleep(Duration::from_millis(100));
                }
                peak
            })
        };
        let lat = Latencies::default();
        let tally = Arc::new(Tally::default());
        let started = Instant::now();
        let tasks: Vec<_> = (0..load.conns)
            .map(|conn| {
                tokio::spawn(one_connection(
                    Arc::clone(&server),
                    conn,
                    load,
                    lat.clone(),
                    tally.clone(),
                ))
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let took = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let peak_sampled = sampler.join().unwrap();
        let cgroups_seen = cgroup_sampler.join().unwrap();
        let total = load.conns * load.per_conn * load.runs;
        assert_eq!(tally.runs.load(Ordering::Relaxed), total);

        // Every sandbox was disposed: nothing of any is left.
        let left = settle(pid, Duration::from_secs(10));
        assert!(left.is_empty(), "processes left: {left:?}");
        assert!(executors(pid).is_empty());
        assert!(server.run_dirs().is_empty(), "{:?}", server.run_dirs());
        assert!(entries(&server.dir.path().join("tmp")).is_empty());
        let cgroups_left = cgroups_gone(pid, &cgroups_before).await;
        let end = Instant::now() + Duration::from_secs(10);
        while fd_count(pid) > fds_before && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let fds_after = fd_count(pid);
        let (rss_after, peak) = (rss_kib(pid), peak_rss_kib(pid).max(peak_sampled));
        let (mut l, mut queued): (Vec<f64>, Vec<f64>) = lat.lock().unwrap().iter().copied().unzip();
        l.sort_by(f64::total_cmp);
        queued.sort_by(f64::total_cmp);
        let runs: Vec<Value> = server
            .audit()
            .into_iter()
            .filter(|a| a.get("event").is_none())
            .collect();
        let sorted = |key: &str| {
            let mut v: Vec<f64> = runs.iter().filter_map(|a| a[key].as_f64()).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let wall = sorted("wall_time_ms");
        eprintln!(
            "session load: {total} runs in {:.1} s = {:.1} runs/s ({} connection(s) x {} \
             sandboxes x {} runs, {SLOTS} run slots), 0 over_capacity; run latency (request to \
             result) p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; queued p50 {:.0} ms, p99 {:.0} \
             ms; in the sandbox p50 {:.0} ms, p99 {:.0} ms; tool calls {}; streamed runs checked \
             whole {}, with drops {}; server RSS {} KiB before, peak {} KiB, {} KiB after; \
             server fds {fds_before} before, {fds_after} after; run cgroups at most \
             {cgroups_seen} at once, {} left",
            took.as_secs_f64(),
            total as f64 / took.as_secs_f64(),
            load.conns,
            load.per_conn,
            load.runs,
            percentile(&l, 50),
            percentile(&l, 99),
            l[l.len() - 1],
            percentile(&queued, 50),
            percentile(&queued, 99),
            percentile(&wall, 50),
            percentile(&wall, 99),
            tally.tool_calls.load(Ordering::Relaxed),
            tally.streamed_checked.load(Ordering::Relaxed),
            tally.dropped_runs.load(Ordering::Relaxed),
            rss_before,
            peak,
            rss_after,
            cgroups_left.len(),
        );
        assert!(
            cgroups_left.is_empty(),
            "run cgroups left: {cgroups_left:?}"
        );
        assert!(
            cgroups_seen > 0 || !cgroups_writable(pid),
            "no run cgroup of the server was ever seen: the probe looks in the wrong place"
        );
        assert!(
            fds_after <= fds_before + 2,
            "server fds leaked: {fds_before} -> {fds_after}: {:?}",
            fd_list(pid)
        );
        assert!(peak < 512 * 1024, "server peak RSS {peak} KiB");
        assert!(
            rss_after < rss_before + 128 * 1024,
            "server RSS grew {rss_before} -> {rss_after} KiB"
        );
        assert_eq!(runs.len(), total + 1, "one audit record per run");
        assert!(runs.iter().all(|a| a["status"] == "completed"));
        assert!(
            took < Duration::from_secs(150),
            "session load took {took:?}"
        );
    }

    /// 8 sandboxes x 10 runs over one connection on 4 run slots: every run completes, none is
    /// refused, nothing leaks. Its speed (the goal: p99 request-to-result under 1 s) is the
    /// bench's row "session load", measured on a machine running nothing else.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn load_8_sandboxes_x_10_runs_one_connection_4_slots_complete_unrefused() {
        session_load(Load {
            conns: 1,
            per_conn: 8,
            runs: 10,
        })
        .await;
    }

    /// 50 sandboxes over 10 connections x 20 runs on 4 run slots, streaming, files and tools:
    /// every run completes, none is refused, nothing leaks. Its latencies are printed (most
    /// of each is time queued: 50 sandboxes share 4 slots); the bench's "session load" row
    /// is where speed is measured.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn load_50_sandboxes_x_20_runs_10_connections_streaming_files_tools_leak_nothing() {
        session_load(Load {
            conns: 10,
            per_conn: 5,
            runs: 20,
        })
        .await;
    }
}
