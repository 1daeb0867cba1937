//! The tenant-isolation rows: tenant B's `sandbox.run_code` of `print(1)` through a real
//! `airlock serve --listen` with a tenants file, alone and then while tenant A, at its quota
//! (`[tenants.a]`: 2 live sandboxes, 1 run at a time), keeps its one run slot busy and floods
//! the server with requests past its quota (creates and second runs, each answered
//! `over_capacity`) from four connections.
//!
//! What it shows: A's refused requests cost B nothing worth measuring, and A's admitted work
//! is held to its share. A's one admitted run sleeps rather than spins: on two cores a spinning
//! run of anyone's takes a core from everyone, which no quota of run counts can hide (a CPU
//! share per tenant would); the row says so.
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What the two phases measured.
#[derive(Debug)]
pub struct Isolation {
    /// B's run latencies alone, milliseconds.
    pub alone_ms: Vec<f64>,
    /// B's run latencies while A floods, milliseconds.
    pub beside_ms: Vec<f64>,
    /// A's requests answered `over_capacity` meanwhile.
    pub refused: u64,
}

const OVER_CAPACITY: i64 = -32018;

struct Client {
    ws: Ws,
    next: i64,
}

impl Client {
    async fn connect(url: &str, token: &str) -> Result<Client, String> {
        let mut req = url.into_client_request().map_err(|e| e.to_string())?;
        let auth = format!("Bearer {token}")
            .parse()
            .map_err(|_| "a bad token")?;
        req.headers_mut().insert("authorization", auth);
        let (ws, _) = tokio_tungstenite::connect_async(req)
            .await
            .map_err(|e| format!("connecting to the server: {e}"))?;
        Ok(Client { ws, next: 1 })
    }

    /// One request's answer (notifications skipped).
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next;
        self.next += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.ws
            .send(Message::text(req.to_string()))
            .await
            .map_err(|e| e.to_string())?;
        while let Some(m) = self.ws.next().await {
            let Message::Text(t) = m.map_err(|e| e.to_string())? else {
                continue;
            };
            let v: Value = serde_json::from_str(&t).map_err(|e| e.to_string())?;
            if v["id"] == json!(id) {
                return Ok(v);
            }
        }
        Err("the server closed the connection".into())
    }

    async fn create(&mut self) -> Result<Value, String> {
        let spec = json!({ "spec": { "requires": ["run_code"] } });
        self.call("sandbox.create", spec).await
    }
}

fn sandbox_id(answer: &Value) -> Result<String, String> {
    answer["result"]["sandbox_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no sandbox: {answer}"))
}

/// `runs` timed runs of `print(1)` in `sandbox`.
async fn timed_runs(c: &mut Client, sandbox: &str, runs: usize) -> Result<Vec<f64>, String> {
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let r = c
            .call(
                "sandbox.run_code",
                json!({ "sandbox_id": sandbox, "code": "print(1)" }),
            )
            .await?;
        out.push(t.elapsed().as_secs_f64() * 1e3);
        if r["result"]["stdout"] != json!("1\n") {
            return Err(format!("B's run did not print 1: {r}"));
        }
    }
    Ok(out)
}

/// The server under test: a tenants file with `a` and `b`, A's quota in a policy file.
struct Setup {
    _dir: tempfile::TempDir,
    child: std::process::Child,
    url: String,
    tokens: [String; 2],
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn token_add(cli: &Path, file: &Path, tenant: &str) -> Result<String, String> {
    let out = std::process::Command::new(cli)
        .args(["token", "add", tenant, "--token-file"])
        .arg(file)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn start(cli: &Path) -> Result<Setup, String> {
    use std::io::BufRead;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("tokens");
    let tokens = [token_add(cli, &file, "a")?, token_add(cli, &file, "b")?];
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        // The floor every other row runs at (a policy file's own default is stricter).
        "floor = \"os_process\"\n[tenants.a]\nmax_sandboxes = 2\nmax_concurrent_runs = 1\n",
    )
    .map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(cli)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-level",
            "error",
            "--token-file",
        ])
        .arg(&file)
        .arg("--policy")
        .arg(&policy)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("starting airlock serve: {e}"))?;
    let mut line = String::new();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let Some(addr) = line.trim().strip_prefix("listening on ws://") else {
        let _ = child.kill();
        return Err(format!("the server did not listen: {line:?}"));
    };
    let url = format!("ws://{addr}/");
    Ok(Setup {
        _dir: dir,
        child,
        url,
        tokens,
    })
}

/// Tenant A at its quota: its one run slot kept busy with a sleeping run, and three
/// connections asking past the quota (a third sandbox; a second run at once) until `stop`.
async fn flood(
    url: String,
    token: String,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
) -> Result<(), String> {
    let mut a = Client::connect(&url, &token).await?;
    let first = sandbox_id(&a.create().await?)?;
    let second = sandbox_id(&a.create().await?)?;
    let busy = {
        let (url, token, stop) = (url.clone(), token.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut c = Client::connect(&url, &token).await?;
            while !stop.load(Ordering::Relaxed) {
                let code = json!({ "sandbox_id": first, "code": "import time; time.sleep(0.5)" });
                c.call("sandbox.run_code", code).await?;
            }
            Ok::<(), String>(())
        })
    };
    let mut over = Vec::new();
    for n in 0..3 {
        let (url, token, stop, refused) = (
            url.clone(),
            token.clone(),
            Arc::clone(&stop),
            Arc::clone(&refused),
        );
        let second = second.clone();
        over.push(tokio::spawn(async move {
            let mut c = Client::connect(&url, &token).await?;
            while !stop.load(Ordering::Relaxed) {
                let r = if n == 0 {
                    c.create().await?
                } else {
                    let code = json!({ "sandbox_id": second, "code": "print(2)" });
                    c.call("sandbox.run_code", code).await?
                };
                if r["error"]["code"] == json!(OVER_CAPACITY) {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<(), String>(())
        }));
    }
    for t in over.into_iter().chain([busy]) {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// Measure `runs` of B's runs alone and beside A's flood.
pub async fn measure(cli: &Path, runs: usize) -> Result<Isolation, String> {
    let s = start(cli)?;
    let mut b = Client::connect(&s.url, &s.tokens[1]).await?;
    let sandbox = sandbox_id(&b.create().await?)?;
    timed_runs(&mut b, &sandbox, 5).await?;
    let alone_ms = timed_runs(&mut b, &sandbox, runs).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let a = tokio::spawn(flood(
        s.url.clone(),
        s.tokens[0].clone(),
        Arc::clone(&stop),
        Arc::clone(&refused),
    ));
    // A holds its quota and is being refused before B's timed runs begin.
    let t = Instant::now();
    while refused.load(Ordering::Relaxed) < 10 {
        if t.elapsed().as_secs() > 30 || a.is_finished() {
            stop.store(true, Ordering::Relaxed);
            return Err(match a.await {
                Ok(Err(e)) => format!("tenant A: {e}"),
                _ => "tenant A was never refused: the row would measure nothing".into(),
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let beside_ms = timed_runs(&mut b, &sandbox, runs).await;
    stop.store(true, Ordering::Relaxed);
    let flooded = a.await.map_err(|e| e.to_string())?;
    let beside_ms = beside_ms?;
    flooded.map_err(|e| format!("tenant A: {e}"))?;
    Ok(Isolation {
        alone_ms,
        beside_ms,
        refused: refused.load(Ordering::Relaxed),
    })
}
