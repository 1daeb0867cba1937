//! One bench scenario on its own, long enough to profile (`perf record -a -g`, `perf stat`):
//!
//! ```sh
//! cargo build --release -p airlock-cli --example profile -p airlock-bench
//! target/release/examples/profile target/release/airlock zygote throughput 600
//! ```
//!
//! VIA: cold | zygote | warm; SCENARIO: start (N runs of `print(1)`, one after another, by VIA)
//! | throughput (N runs, two at a time) | tool (one warm run making N `echo` calls). Prints the
//! scenario's figure.
use std::path::PathBuf;

use airlock_bench::airlock::{self, Via};

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
    let zygote = match via.as_str() {
        "zygote" => Some(airlock::zygote(&exe).await?),
        _ => None,
    };
    let pool = (via == "warm").then(|| airlock::pool(&exe, 2, airlock::limits(0)));
    let via = match (&zygote, &pool) {
        (Some(z), _) => Via::Zygote(z),
        (_, Some(p)) => Via::Warm(p),
        _ => Via::Cold,
    };
    match scenario.as_str() {
        "throughput" => {
            let rate = airlock::throughput(&exe, via, n, 2, &airlock::limits(0)).await?;
            println!("{rate:.1} runs/s");
        }
        "start" => {
            let mut ms = airlock::start(&exe, via, n, &airlock::limits(0)).await?;
            ms.sort_by(f64::total_cmp);
            println!("p50 {:.2} ms", ms[ms.len() / 2]);
        }
        "tool" => {
            let pool = airlock::pool(&exe, 1, airlock::limits(n));
            let us = airlock::tool_round_trips(&exe, &pool, n).await?;
            let mut sorted = us.clone();
            sorted.sort_by(f64::total_cmp);
            println!("p50 {:.1} us", sorted[sorted.len() / 2]);
        }
        other => return Err(format!("unknown scenario {other:?}")),
    }
    Ok(())
}
