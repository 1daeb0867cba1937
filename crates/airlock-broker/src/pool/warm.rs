//! One pooled executor: started, isolated and attested ahead of time, used by one run.
use std::time::Instant;

use airlock_executor::attest::own_namespaces;
use airlock_protocol::{Id, Message};
use serde_json::{json, Map, Value};

use super::config::PoolConfig;
use crate::result::RunResult;
use crate::run::{
    check_ready, drive, launch, prepare, run_probe, Cancel, Launched, Prepared, RunSpec, Start,
    Workload, EXECUTE_ID,
};
use crate::tools::ToolHandler;

/// An attested executor waiting for `execute`, with the fresh work dir it was started in.
pub(super) struct Warm {
    launched: Launched,
    /// Owns the work dir (removed when the run is over).
    prepared: Prepared,
}

impl Warm {
    /// Prepare, spawn and isolate an executor exactly as a cold run does, and wait for its
    /// attestation; an executor whose attestation fails is killed, never pooled.
    pub(super) async fn start(config: &PoolConfig) -> Result<Self, String> {
        let spec = RunSpec {
            workload: Workload::Python {
                code: String::new(),
                interpreter: config.interpreter.clone(),
            },
            limits: config.limits.clone(),
            sandbox: None,
            image: None,
            cwd: None,
            env: Vec::new(),
            executor: config.executor.clone(),
            output: None,
            restricted: None,
        };
        let mut prepared = prepare(&spec, run_probe).await.map_err(|n| n.message)?;
        let forked = match &config.zygote {
            Some(z) => z.launch(&mut prepared, &config.limits).await,
            None => None,
        };
        let launched = match forked {
            Some(l) => l,
            None => launch(&prepared, &config.limits).await,
        };
        let mut launched = launched.map_err(|n| n.message)?;
        let ready = tokio::time::timeout(config.startup_timeout, await_ready(&mut launched))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "executor not ready within {:?}",
                    config.startup_timeout
                ))
            });
        // Pooled only once it is in its cgroup too: a warm run must hold the same layers.
        let ready = match ready {
            Ok(()) => {
                let cpu = config.limits.cpu_millicores.is_some();
                launched.attached(cpu).await
            }
            Err(why) => Err(why),
        };
        match ready {
            Ok(()) => Ok(Self { launched, prepared }),
            Err(why) => {
                launched.discard().await;
                Err(why)
            }
        }
    }

    pub(super) fn stage_pid(&self) -> i32 {
        self.launched.stage_pid()
    }

    /// Whether the executor is still waiting (it could have been killed while idle).
    pub(super) fn alive(&mut self) -> bool {
        !self.launched.exited()
    }

    /// Kill and reap an executor that will not run anything.
    pub(super) async fn discard(self) {
        self.launched.discard().await;
        drop(self.prepared);
    }

    /// Hand the run's program and environment to the executor and supervise it to the end.
    pub(super) async fn run(
        self,
        spec: &RunSpec,
        tools: &dyn ToolHandler,
        cancel: Cancel,
        started: Instant,
    ) -> RunResult {
        let code = match &spec.workload {
            Workload::Python { code, .. } => code.as_str(),
            Workload::Command { .. } => "",
        };
        let env: Map<String, Value> = spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let execute = Message::request(
            Id::Number(EXECUTE_ID),
            "execute",
            Some(
                json!({ "code": code, "env": env, "sys_path": self.prepared.sys_path,
                         "restricted": spec.restricted }),
            ),
        );
        // A closed socket is seen by supervision as the executor's exit.
        let _ = self.launched.send(execute);
        let result = drive(
            self.launched,
            Start::Attested,
            &spec.limits,
            tools,
            cancel,
            started,
        )
        .await;
        drop(self.prepared);
        result
    }
}

/// Read the executor's first message: a `ready` whose attestation must verify.
async fn await_ready(launched: &mut Launched) -> Result<(), String> {
    let broker_ns = own_namespaces();
    match launched.recv().await {
        Some(Message::Notification(n)) if n.method == "ready" => check_ready(n.params, &broker_ns)
            .map_err(|why| format!("the sandbox could not prove its isolation: {why}")),
        Some(Message::Notification(n)) if n.method == "refused" => {
            let params = n.params.unwrap_or(Value::Null);
            let layer = params["layer"].as_str().unwrap_or("unknown");
            let message = params["message"].as_str().unwrap_or("");
            Err(format!("sandbox layer {layer} unavailable: {message}"))
        }
        Some(_) => Err("executor sent something other than its attestation".into()),
        None => Err("executor exited during start-up".into()),
    }
}
