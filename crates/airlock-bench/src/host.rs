//! Measuring a peer that is a host process (plain python3, bwrap, unshare): start latency, a
//! JSON-lines tool channel over its pipes, throughput, idle memory and kill latency.
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use airlock_jail::{process, procfs};

const SIGKILL: i32 = 9;
/// Bound on what the helpers read from a peer: its output is a few lines of numbers.
const READ_CAP: u64 = 1 << 20;

fn command(argv: &[String]) -> Result<Command, String> {
    let (first, rest) = argv.split_first().ok_or("empty command")?;
    let mut c = Command::new(first);
    c.args(rest);
    Ok(c)
}

fn bounded_read(r: impl Read) -> String {
    let mut s = String::new();
    let _ = r.take(READ_CAP).read_to_string(&mut s);
    s
}

/// Run `argv` to completion; its time from spawn to reaped, in ms, if it printed `expect`.
pub fn start_ms(argv: &[String], expect: &str) -> Result<f64, String> {
    let t0 = Instant::now();
    let out = command(argv)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || stdout != expect {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "failed ({}): {}",
            out.status,
            stderr.trim().chars().take(160).collect::<String>()
        ));
    }
    Ok(ms)
}

/// The guest side of the JSON-lines tool channel: `calls` echo round trips over stdout/stdin,
/// each timed with perf_counter_ns, the timings printed to stderr.
pub fn tool_program(calls: usize) -> String {
    format!(
        "import json, sys, time\n\
         out, inp = sys.stdout, sys.stdin\n\
         def call_tool(name, args):\n\
         \x20   out.write(json.dumps({{'tool': name, 'args': args}}) + '\\n'); out.flush()\n\
         \x20   return json.loads(inp.readline())\n\
         ns = []\n\
         for i in range({calls}):\n\
         \x20   t = time.perf_counter_ns(); call_tool('echo', {{'i': i}}); ns.append(time.perf_counter_ns() - t)\n\
         sys.stderr.write(json.dumps(ns) + '\\n')\n"
    )
}

/// Run [`tool_program`] under `argv`, echoing every line back; per-call µs.
pub fn tool_round_trips(argv: &[String]) -> Result<Vec<f64>, String> {
    let mut child = command(argv)?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let errs = std::thread::spawn(move || bounded_read(stderr));
    for line in BufReader::new(stdout.take(64 * READ_CAP)).lines() {
        let Ok(line) = line else { break };
        // The host tool: echo the arguments back.
        let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        let reply = format!("{}\n", v["args"]);
        if stdin.write_all(reply.as_bytes()).is_err() {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    let err = errs.join().unwrap_or_default();
    let last = err.lines().last().unwrap_or("");
    let ns: Vec<f64> =
        serde_json::from_str(last).map_err(|_| format!("no timings: {}", err.trim()))?;
    Ok(ns.into_iter().map(|n| n / 1e3).collect())
}

/// `total` runs of `argv`, `workers` at a time; runs per second.
pub fn throughput(
    argv: &[String],
    expect: &str,
    total: usize,
    workers: usize,
) -> Result<f64, String> {
    let t0 = Instant::now();
    let per = total.div_ceil(workers);
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let argv = argv.to_vec();
            let expect = expect.to_string();
            std::thread::spawn(move || {
                (0..per).try_for_each(|_| start_ms(&argv, &expect).map(|_| ()))
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "worker panicked".to_string())??;
    }
    Ok((per * workers) as f64 / t0.elapsed().as_secs_f64())
}

fn kill_tree(child: &mut Child) {
    let Ok(root) = i32::try_from(child.id()) else {
        return;
    };
    let mut tree = procfs::descendants(root);
    tree.push(root);
    for pid in tree {
        let _ = process::kill(pid, SIGKILL);
    }
}

fn live(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty()
        && !stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
}

/// Start `count` idle instances of `argv` (a program that prints `ready` and blocks on stdin);
/// the summed PSS of each instance's process tree while all are alive, in MiB.
pub fn idle_pss_mib(argv: &[String], count: usize) -> Result<Vec<f64>, String> {
    let mut children = Vec::new();
    let mut result = Ok(Vec::new());
    for _ in 0..count {
        let spawned = command(argv)?
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string());
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        let mut line = String::new();
        if let Some(out) = child.stdout.as_mut() {
            let _ = BufReader::new(out.take(64)).read_line(&mut line);
        }
        children.push(child);
        if line.trim() != "ready" {
            result = Err("the idle program did not start".to_string());
            break;
        }
    }
    if let Ok(samples) = result.as_mut() {
        for c in &children {
            let pid = i32::try_from(c.id()).unwrap_or(0);
            match crate::memory::tree_pss_mib(pid) {
                Ok(mib) => samples.push(mib),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
    }
    for mut c in children {
        kill_tree(&mut c);
        let _ = c.wait();
    }
    result
}

/// Start a busy loop under `argv`, let `budget` pass (the timeout fires), then kill its tree;
/// ms from the kill to the whole tree gone and reaped.
pub fn kill_latency_ms(argv: &[String], budget: Duration) -> Result<f64, String> {
    let mut child = command(argv)?
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    std::thread::sleep(budget);
    let root = i32::try_from(child.id()).unwrap_or(0);
    let mut tree = procfs::descendants(root);
    if !matches!(child.try_wait(), Ok(None)) {
        let _ = child.kill();
        let _ = child.wait();
        return Err("the busy loop was not running when its timeout fired".into());
    }
    tree.push(root);
    let t0 = Instant::now();
    kill_tree(&mut child);
    child.wait().map_err(|e| e.to_string())?;
    while tree.iter().any(|p| live(*p)) {
        if t0.elapsed() > Duration::from_secs(5) {
            return Err("tree not gone after 5 s".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(t0.elapsed().as_secs_f64() * 1e3)
}
