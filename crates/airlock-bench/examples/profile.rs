//! One bench scenario on its own, long enough to profile (`perf record -a -g`, `perf stat`):
//!
//! ```sh
//! cargo build --release -p airlock-cli --example profile -p airlock-bench
//! target/release/examples/profile target/release/airlock zygote throughput 600
//! ```
//!
//! VIA: cold | zygote | warm; SCENARIO: start (N runs of `print(1)`, one after another, by VIA)
//! | throughput (N runs, two at a time) | tool (one warm run making N `echo` calls) | tenants
//! (VIA ignored: tenant B's N runs alone and beside tenant A flooding past its quota, through
//! `airlock serve`). Prints the scenario's figure.
use std::path::PathBuf;
use std::sync::Arc;

use airlock_bench::airlock::{self, Door};

fn main() -> Result<(), String> {
    // PROFILE_WORKERS: the broker's runtime — 0 a current-thread one, N a multi-thread one with
    // N workers (default 2, as `airlock bench` and `airlock serve` on this machine).
    let workers: usize = match std::env::var("PROFILE_WORKERS") {
        Ok(n) => n.parse().map_err(|e| format!("PROFILE_WORKERS: {e}"))?,
        Err(_) => 2,
    };
    let rt = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
    };
    rt.map_err(|e| e.to_string())?.block_on(scenario())
}

async fn scenario() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [exe, via, scenario, n] = args.as_slice() else {
        return Err(
            "usage: profile AIRLOCK_BINARY cold|zygote|warm start|throughput|tool N".into(),
        );
    };
    let exe = PathBuf::from(exe);
    let n: usize = n.parse().map_err(|e| format!("N: {e}"))?;
    if scenario == "cow" {
        // `profile AIRLOCK_BINARY - cow N`: N copy-on-write forks of the bench's ~100 MB kernel.
        for r in airlock_bench::snapshots::measure_cow(&exe, n)? {
            let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len().max(1) as f64;
            println!(
                "fork {:.1} ms per branch, USS {:.2} MiB, PSS {:.1} MiB per branch",
                r.fork_ms_per_branch,
                mean(&r.branch_uss_mib),
                mean(&r.branch_pss_mib)
            );
        }
        return Ok(());
    }
    if scenario == "pause" {
        // `profile AIRLOCK_BINARY - pause N`: N pause-resume rounds of the bench's ~100 MB kernel.
        for r in airlock_bench::snapshots::measure(&exe, n)? {
            println!(
                "pause {:.1} ms ({:.2} s/GB of {:.0} MB), resume {:.1} ms",
                r.pause_ms,
                r.pause_ms / r.rss,
                r.rss / 1e6,
                r.resume_ms
            );
        }
        return Ok(());
    }
    if scenario == "tenants" {
        // `profile AIRLOCK_BINARY - tenants N`: the tenant-isolation row on its own.
        let m = airlock_bench::tenants::measure(&exe, n).await?;
        let p99 = |x: &[f64]| airlock_bench::stats::summarize(x.to_vec()).map_or(0.0, |s| s.p99);
        println!(
            "B alone p99 {:.2} ms, beside A p99 {:.2} ms ({:.2}x), A refused {} times",
            p99(&m.alone_ms),
            p99(&m.beside_ms),
            p99(&m.beside_ms) / p99(&m.alone_ms),
            m.refused
        );
        return Ok(());
    }
    let door = match via.as_str() {
        "zygote" => Door::zygote(Arc::new(airlock::zygote(&exe).await?), 2),
        "warm" => Door::warm(airlock::pool(&exe, 2, airlock::limits(0)), 2),
        _ => Door::cold(2),
    };
    let r = match scenario.as_str() {
        "throughput" => airlock::throughput(&exe, &door, n, 2, &airlock::limits(0))
            .await
            .map(|rate| println!("{rate:.1} runs/s")),
        "start" => airlock::start(&exe, &door, n, &airlock::limits(0))
            .await
            .map(|mut ms| {
                ms.sort_by(f64::total_cmp);
                println!("p50 {:.2} ms", ms[ms.len() / 2]);
            }),
        "tool" => {
            let pool = Door::warm(airlock::pool(&exe, 1, airlock::limits(n)), 1);
            let us = airlock::tool_round_trips(&exe, &pool, n).await;
            pool.shutdown().await;
            us.map(|mut us| {
                us.sort_by(f64::total_cmp);
                println!("p50 {:.1} us", us[us.len() / 2]);
            })
        }
        other => Err(format!("unknown scenario {other:?}")),
    };
    door.shutdown().await;
    r
}
