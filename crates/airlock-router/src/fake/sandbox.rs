//! `FakeSandbox`: an in-memory file store, emulated commands and programs, and records.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use airlock_policy::{Egress, GuestRelPath, SandboxKey, SandboxSpec};
use async_trait::async_trait;

use super::fault::Fault;
use super::interp::{allowed, statement, url_host, Stmt};
use crate::router::lock;
use crate::sandbox::{
    DirEntry, ExecOptions, ExecResult, FileStat, RunOptions, RunResult, RunStatus, Sandbox,
    SandboxError,
};

/// A scripted answer for commands or programs containing a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FakeOutput {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit code.
    pub exit_code: i32,
}

#[derive(Debug, Default)]
struct Records {
    files: BTreeMap<String, Vec<u8>>,
    commands: Vec<Vec<String>>,
    programs: Vec<String>,
    reclaims: Vec<String>,
    scripts: Vec<(String, FakeOutput)>,
}

/// One fake sandbox.
#[derive(Debug)]
pub struct FakeSandbox {
    key: SandboxKey,
    work_dir: String,
    egress: Egress,
    egress_allow: Vec<String>,
    faults: BTreeSet<Fault>,
    rec: Mutex<Records>,
}

fn abs(working_directory: &str, path: &GuestRelPath) -> String {
    path.under(working_directory)
}

impl FakeSandbox {
    pub(crate) fn new(key: SandboxKey, spec: &SandboxSpec, faults: BTreeSet<Fault>) -> FakeSandbox {
        FakeSandbox {
            key,
            work_dir: spec.work_dir().to_owned(),
            egress: spec.egress(),
            egress_allow: spec.egress_allow().to_vec(),
            faults,
            rec: Mutex::new(Records::default()),
        }
    }

    /// Commands and programs containing `pattern` answer `output`.
    pub fn script(&self, pattern: &str, output: FakeOutput) {
        lock(&self.rec).scripts.push((pattern.to_owned(), output));
    }
    /// Every command run, in order.
    #[must_use]
    pub fn commands(&self) -> Vec<Vec<String>> {
        lock(&self.rec).commands.clone()
    }
    /// Every program evaluated, in order (separate from commands on purpose).
    #[must_use]
    pub fn programs(&self) -> Vec<String> {
        lock(&self.rec).programs.clone()
    }
    /// Every directory reclaimed, in order (absolute).
    #[must_use]
    pub fn reclaims(&self) -> Vec<String> {
        lock(&self.rec).reclaims.clone()
    }
    /// The absolute paths of every file held.
    #[must_use]
    pub fn files(&self) -> Vec<String> {
        lock(&self.rec).files.keys().cloned().collect()
    }

    fn has(&self, f: Fault) -> bool {
        self.faults.contains(&f)
    }

    fn scripted(&self, text: &str) -> Option<FakeOutput> {
        lock(&self.rec)
            .scripts
            .iter()
            .find(|(p, _)| text.contains(p.as_str()))
            .map(|(_, o)| o.clone())
    }

    fn finish(&self, mut out: ExecResult) -> ExecResult {
        // Text-only results (scripted, built in) carry their bytes too.
        if out.stdout_raw.is_empty() {
            out.stdout_raw = out.stdout.clone().into_bytes();
        }
        if out.stderr_raw.is_empty() {
            out.stderr_raw = out.stderr.clone().into_bytes();
        }
        if self.has(Fault::MergeStderr) {
            let err = std::mem::take(&mut out.stderr);
            out.stdout.push_str(&err);
            let err = std::mem::take(&mut out.stderr_raw);
            out.stdout_raw.extend(err);
        }
        if self.has(Fault::LossyOutput) {
            out.stdout_raw = out.stdout.clone().into_bytes();
            out.stderr_raw = out.stderr.clone().into_bytes();
        }
        if self.has(Fault::DropExitCode) && out.exit_code.is_some() {
            out.exit_code = Some(0);
        }
        out
    }

    async fn wait(&self, wanted: Duration, bound: Duration) -> bool {
        if self.has(Fault::IgnoreTimeout) || wanted <= bound {
            tokio::time::sleep(wanted).await;
            false
        } else {
            tokio::time::sleep(bound).await;
            true
        }
    }

    fn resolve(&self, cwd: &str, p: &str) -> String {
        if p.starts_with('/') {
            p.to_owned()
        } else {
            format!("{}/{p}", cwd.trim_end_matches('/'))
        }
    }

    async fn builtin(&self, argv: &[String], opts: &ExecOptions) -> ExecResult {
        let cwd = opts.working_directory.as_deref().unwrap_or(&self.work_dir);
        let ok = |stdout: String| ExecResult {
            exit_code: Some(0),
            stdout,
            ..ExecResult::default()
        };
        let fail = |code: i32, stderr: String| ExecResult {
            exit_code: Some(code),
            stderr,
            ..ExecResult::default()
        };
        let Some((cmd, args)) = argv.split_first() else {
            return fail(127, "empty command\n".to_owned());
        };
        match cmd.as_str() {
            "true" => ok(String::new()),
            "false" => fail(1, String::new()),
            "echo" => ok(format!("{}\n", args.join(" "))),
            "cat" => {
                let rec = lock(&self.rec);
                let mut out = Vec::new();
                for a in args {
                    match rec.files.get(&self.resolve(cwd, a)) {
                        Some(data) => out.extend_from_slice(data),
                        None => return fail(1, format!("cat: {a}: No such file or directory\n")),
                    }
                }
                ExecResult {
                    stdout_raw: out.clone(),
                    ..ok(String::from_utf8_lossy(&out).into_owned())
                }
            }
            "sleep" => {
                let secs: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(0.0);
                let wanted = Duration::from_secs_f64(secs.clamp(0.0, 3600.0));
                if self.wait(wanted, opts.timeout).await {
                    ExecResult {
                        exit_code: None,
                        timed_out: true,
                        ..ExecResult::default()
                    }
                } else {
                    ok(String::new())
                }
            }
            "curl" => {
                let url = args.iter().rev().find(|a| !a.starts_with('-'));
                let host = url.and_then(|u| url_host(u));
                let reachable = self.has(Fault::LeakEgress)
                    || (self.egress == Egress::Allowlist
                        && host.is_some_and(|h| allowed(h, &self.egress_allow)));
                if reachable {
                    ok("ok\n".to_owned())
                } else {
                    fail(
                        7,
                        format!("curl: (7) Failed to connect to {}\n", host.unwrap_or("?")),
                    )
                }
            }
            other => fail(127, format!("{other}: command not found\n")),
        }
    }
}

#[async_trait]
impl Sandbox for FakeSandbox {
    fn key(&self) -> &SandboxKey {
        &self.key
    }

    async fn exec(&self, argv: &[String], opts: &ExecOptions) -> Result<ExecResult, SandboxError> {
        lock(&self.rec).commands.push(argv.to_vec());
        if let Some(s) = self.scripted(&argv.join(" ")) {
            return Ok(self.finish(ExecResult {
                exit_code: Some(s.exit_code),
                stdout: s.stdout,
                stderr: s.stderr,
                ..ExecResult::default()
            }));
        }
        let out = self.builtin(argv, opts).await;
        Ok(self.finish(out))
    }

    async fn run_code(&self, code: &str, opts: &RunOptions) -> Result<RunResult, SandboxError> {
        lock(&self.rec).programs.push(code.to_owned());
        let mut r = RunResult {
            status: RunStatus::Completed,
            exit_code: Some(0),
            stdout: String::new(),
            stderr: String::new(),
            tool_calls: 0,
        };
        if let Some(s) = self.scripted(code) {
            r.stdout = s.stdout;
            r.stderr = s.stderr;
            r.exit_code = Some(s.exit_code);
        } else {
            for line in code.lines() {
                match statement(line) {
                    Some(Stmt::Nothing) => {}
                    Some(Stmt::Print(s)) => {
                        r.stdout.push_str(&s);
                        r.stdout.push('\n');
                    }
                    Some(Stmt::Stderr(s)) => r.stderr.push_str(&s),
                    Some(Stmt::Exit(n)) => {
                        r.exit_code = Some(n);
                        break;
                    }
                    Some(Stmt::Spin) => {
                        // Spins for an hour of test time unless the bound stops it.
                        if self.wait(Duration::from_secs(3600), opts.timeout).await {
                            r.status = RunStatus::Timeout;
                            r.exit_code = None;
                        }
                        break;
                    }
                    Some(Stmt::WriteFile(p, d)) => {
                        let path = self.resolve(&self.work_dir, &p);
                        lock(&self.rec).files.insert(path, d.into_bytes());
                    }
                    None => {
                        r.stderr.push_str(&format!(
                            "fake interpreter: unsupported statement: {line}\n"
                        ));
                        r.exit_code = Some(1);
                        break;
                    }
                }
            }
        }
        if self.has(Fault::MergeStderr) {
            let err = std::mem::take(&mut r.stderr);
            r.stdout.push_str(&err);
        }
        if self.has(Fault::DropExitCode) && r.exit_code.is_some() {
            r.exit_code = Some(0);
        }
        if r.status == RunStatus::Completed && r.exit_code != Some(0) {
            r.status = RunStatus::Failed;
        }
        Ok(r)
    }

    async fn write_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        data: &[u8],
    ) -> Result<(), SandboxError> {
        let target = abs(working_directory, path);
        let mut rec = lock(&self.rec);
        let mut parent = working_directory.trim_end_matches('/').to_owned();
        for seg in path.segments() {
            if rec.files.contains_key(&parent) {
                return Err(SandboxError::NotConfined {
                    path: path.to_string(),
                });
            }
            parent = format!("{parent}/{seg}");
        }
        let prefix = format!("{target}/");
        if rec.files.keys().any(|k| k.starts_with(&prefix)) {
            return Err(SandboxError::NotConfined {
                path: path.to_string(),
            });
        }
        rec.files.insert(target, data.to_vec());
        Ok(())
    }

    async fn read_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, SandboxError> {
        let rec = lock(&self.rec);
        let data = rec
            .files
            .get(&abs(working_directory, path))
            .ok_or_else(|| SandboxError::NotFound {
                path: path.to_string(),
            })?;
        let size = data.len() as u64;
        if size > max_bytes {
            if self.has(Fault::TruncateReads) {
                let keep = usize::try_from(max_bytes).unwrap_or(usize::MAX);
                return Ok(data[..keep].to_vec());
            }
            return Err(SandboxError::TooLarge {
                path: path.to_string(),
                size,
                max: max_bytes,
            });
        }
        Ok(data.clone())
    }

    async fn stat(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<Option<FileStat>, SandboxError> {
        let target = abs(working_directory, path);
        let rec = lock(&self.rec);
        if let Some(d) = rec.files.get(&target) {
            return Ok(Some(FileStat::file(d.len() as u64)));
        }
        let prefix = format!("{target}/");
        Ok(rec
            .files
            .keys()
            .any(|k| k.starts_with(&prefix))
            .then_some(FileStat::dir()))
    }

    async fn list(
        &self,
        working_directory: &str,
        dir: Option<&GuestRelPath>,
    ) -> Result<Vec<DirEntry>, SandboxError> {
        let base = match dir {
            Some(d) => abs(working_directory, d),
            None => working_directory.trim_end_matches('/').to_owned(),
        };
        let prefix = format!("{base}/");
        let rec = lock(&self.rec);
        let mut out: BTreeMap<String, FileStat> = BTreeMap::new();
        for (k, v) in &rec.files {
            let Some(rest) = k.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((name, _)) => {
                    out.insert(name.to_owned(), FileStat::dir());
                }
                None => {
                    out.insert(rest.to_owned(), FileStat::file(v.len() as u64));
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|(name, stat)| DirEntry { name, stat })
            .collect())
    }

    async fn remove(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<(), SandboxError> {
        if self.has(Fault::IgnoreRemove) {
            return Ok(());
        }
        // Missing is success: removal is idempotent.
        let removed = lock(&self.rec).files.remove(&abs(working_directory, path));
        if removed.is_none() && self.has(Fault::StrictRemove) {
            return Err(SandboxError::NotFound {
                path: path.to_string(),
            });
        }
        Ok(())
    }

    async fn reclaim(
        &self,
        working_directory: &str,
        directory: &GuestRelPath,
        _timeout: Duration,
    ) -> Result<(), SandboxError> {
        let target = abs(working_directory, directory);
        let mut rec = lock(&self.rec);
        rec.reclaims.push(target.clone());
        if self.has(Fault::FailReclaim) {
            return Err(SandboxError::Backend {
                detail: "fake told to fail reclaim at 10.0.0.1".to_owned(),
            });
        }
        if self.has(Fault::IgnoreRemove) {
            return Ok(());
        }
        let prefix = format!("{target}/");
        rec.files
            .retain(|k, _| k != &target && !k.starts_with(&prefix));
        Ok(())
    }
}
