//! The router's [`Sandbox`] trait over a [`LocalSandbox`]: runs through
//! [`LocalSandbox::run_request`], file methods through the no-follow operations of
//! [`crate::files`].
use std::time::Duration;

use airlock_broker::Workload;
use airlock_policy::{GuestRelPath, SandboxKey};
use airlock_router::{
    DirEntry, ExecOptions, ExecResult, FileStat, RunOptions, RunResult, RunStatus, Sandbox,
    SandboxError,
};
use async_trait::async_trait;

use crate::files;
use crate::run::command_not_found;
use crate::sandbox::LocalSandbox;

fn env_vec(env: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[async_trait]
impl Sandbox for LocalSandbox {
    fn key(&self) -> &SandboxKey {
        &self.key
    }

    async fn exec(&self, argv: &[String], opts: &ExecOptions) -> Result<ExecResult, SandboxError> {
        let mut r = self
            .run_plain(
                Workload::Command {
                    argv: argv.to_vec(),
                },
                opts.timeout,
                env_vec(&opts.env),
                opts.working_directory.as_deref(),
            )
            .await?;
        let timed_out = r.status == airlock_broker::RunStatus::Timeout;
        if command_not_found(&r) {
            // What a shell answers: exit 127 and the reason on stderr.
            r.exit_code = Some(127);
            r.stderr = format!("{}\n", r.error.as_ref().map_or("", |e| e.message.as_str()));
            r.stderr_raw = r.stderr.clone().into_bytes();
        }
        Ok(ExecResult {
            exit_code: if timed_out { None } else { r.exit_code },
            truncated: r.stdout_truncated || r.stderr_truncated,
            stdout: r.stdout,
            stderr: r.stderr,
            stdout_raw: r.stdout_raw,
            stderr_raw: r.stderr_raw,
            timed_out,
        })
    }

    async fn run_code(&self, code: &str, opts: &RunOptions) -> Result<RunResult, SandboxError> {
        let r = self
            .run_plain(
                Workload::Python {
                    code: code.to_owned(),
                    interpreter: self.python(),
                },
                opts.timeout,
                env_vec(&opts.env),
                None,
            )
            .await?;
        use airlock_broker::RunStatus as B;
        let status = match r.status {
            B::Completed => RunStatus::Completed,
            B::Timeout => RunStatus::Timeout,
            B::MemoryLimit => RunStatus::MemoryLimit,
            B::DiskLimit => RunStatus::DiskLimit,
            B::Error | B::Killed | B::ProtocolError | B::Refused | B::Cancelled => {
                RunStatus::Failed
            }
        };
        let mut stderr = r.stderr;
        if !matches!(r.status, B::Completed | B::Error) {
            // The broker's reason (a kill, a refusal, a protocol error) would be lost in
            // `Failed`: it follows what the program wrote, as a shell's own message would.
            if let Some(e) = &r.error {
                if !stderr.is_empty() && !stderr.ends_with('\n') {
                    stderr.push('\n');
                }
                stderr.push_str(&format!("airlock: {}: {}\n", r.status.as_str(), e.message));
            }
        }
        Ok(RunResult {
            status,
            exit_code: r.exit_code,
            stdout: r.stdout,
            stderr,
            tool_calls: u64::from(r.tool_calls),
        })
    }

    async fn write_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        data: &[u8],
    ) -> Result<(), SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        let size = data.len() as u64;
        let max = self.files_in.max_bytes_per_file;
        if size > max {
            return Err(SandboxError::TooLarge {
                path: path.to_string(),
                size,
                max,
            });
        }
        let data = data.to_vec();
        self.blocking(move |root| files::write_file(root, &rel, &data))
            .await
    }

    async fn read_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| files::read_file(root, &rel, max_bytes))
            .await
    }

    async fn stat(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<Option<FileStat>, SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| files::stat(root, &rel)).await
    }

    async fn list(
        &self,
        working_directory: &str,
        dir: Option<&GuestRelPath>,
    ) -> Result<Vec<DirEntry>, SandboxError> {
        let rel = match (self.prefix(working_directory)?, dir) {
            (None, None) => None,
            (Some(p), None) => Some(p),
            (None, Some(d)) => Some(d.as_str().to_owned()),
            (Some(p), Some(d)) => Some(format!("{p}/{d}")),
        };
        self.blocking(move |root| files::list(root, rel.as_deref()))
            .await
    }

    async fn remove(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<(), SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| files::remove(root, &rel)).await
    }

    async fn reclaim(
        &self,
        working_directory: &str,
        directory: &GuestRelPath,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rel = self.rel_path(working_directory, directory)?;
        tokio::time::timeout(
            timeout,
            self.blocking(move |root| files::reclaim(root, &rel)),
        )
        .await
        .map_err(|_| SandboxError::Timeout)?
    }
}
