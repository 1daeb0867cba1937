//! `airlock run/exec --put LOCAL=GUEST --get GUEST=LOCAL` and `--tool NAME=CMD`, on the same
//! machinery as the `local` backend.
//!
//! `--put` copies a host file into the work dir before the run with the local sandbox's
//! `write_file` (no-follow, parents created, exact bytes), bounded by the default `files_in`
//! limits. `--get` collects after the run with `collect_outputs` (required output, declared
//! `application/octet-stream`, the default `files_out` caps) into a `FileSystemSink` rooted at
//! LOCAL's parent directory: LOCAL must not exist (exclusive create), and a symlink in the way
//! is refused. The work dir is the run's own sandbox filesystem (`/work`), which exists only
//! in the sandbox's namespaces and is freed after the run.
//!
//! `--tool NAME=CMD` registers through the host-tool registry with a fixed declaration:
//! source `host-command`, sink `host-command`, identity `app` (a host command runs with the
//! invoking user's authority, reads from and writes to the host), and the argument schema
//! `{"type": "object"}`. Every call is gated, capped and answered as a structured denial there.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_broker::SandboxFs;
use airlock_local::{
    CommandBody, FileSystemSink, LocalConfig, LocalSandbox, RegistryTools, RunDoor,
};
use airlock_policy::{GuestRelPath, Identity, SandboxKey, SandboxSpec, TransferLimits};
use airlock_router::host_tools::{HostTool, HostToolLimits, HostToolRegistry, ToolDeclaration};
use airlock_router::outputs::{collect_outputs, CollectContext, Collected, DeclaredOutput};
use airlock_router::Sandbox;
use anyhow::{bail, Context};

fn split(s: &str, flag: &str, shape: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_owned(), b.to_owned())),
        _ => bail!("{flag} must look like {shape}, got {s:?}"),
    }
}

/// GUEST of `--put`/`--get`: relative to /work, or absolute under it (`/work/x` is `x`), as
/// MCP's file tools take it; a path that would leave /work is refused.
fn guest_path(raw: &str) -> anyhow::Result<GuestRelPath> {
    GuestRelPath::parse_in_work(raw)
        .with_context(|| "a guest path is relative to /work or starts with /work/".to_owned())
}

/// The registry door for `--tool NAME=CMD` flags (see the module docs for the declaration).
pub fn tool_handler(tools: &[String], max_calls: u32) -> anyhow::Result<RunDoor> {
    let mut reg = HostToolRegistry::new().limits(HostToolLimits {
        max_calls_per_run: max_calls,
        ..HostToolLimits::default()
    });
    for t in tools {
        let (name, cmd) = split(t, "--tool", "NAME=CMD")?;
        reg.register(HostTool {
            name: name.clone(),
            description: format!("host command tool {name}"),
            schema: serde_json::json!({"type": "object"}),
            declaration: ToolDeclaration::new(
                Some("host-command"),
                Some("host-command"),
                Some(Identity::App),
            ),
            body: Arc::new(CommandBody::new(&name, &cmd)),
        })
        .with_context(|| format!("--tool {name}"))?;
    }
    Ok(RegistryTools::new(reg.seal()).handler(None))
}

/// The puts and gets of one run, over the sandbox filesystem the run uses.
pub struct Transfers {
    sandbox: LocalSandbox,
    spec: SandboxSpec,
    puts: Vec<(PathBuf, GuestRelPath)>,
    gets: Vec<(GuestRelPath, PathBuf)>,
}

impl Transfers {
    /// Parses the flags; `None` when there is nothing to transfer.
    pub fn prepare(
        put: &[String],
        get: &[String],
        fs: &Arc<SandboxFs>,
        (files_in, files_out): (TransferLimits, TransferLimits),
    ) -> anyhow::Result<Option<Transfers>> {
        if put.is_empty() && get.is_empty() {
            return Ok(None);
        }
        let puts = put
            .iter()
            .map(|s| {
                let (local, guest) = split(s, "--put", "LOCAL=GUEST")?;
                let guest = guest_path(&guest).with_context(|| format!("--put {s}"))?;
                Ok((PathBuf::from(local), guest))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let gets = get
            .iter()
            .map(|s| {
                let (guest, local) = split(s, "--get", "GUEST=LOCAL")?;
                let guest = guest_path(&guest).with_context(|| format!("--get {s}"))?;
                Ok((guest, PathBuf::from(local)))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let spec = SandboxSpec::builder("cli")
            .files_in(files_in)
            .files_out(files_out)
            .build()?;
        let key = SandboxKey::new("cli", "run", "transfer")?;
        let exe = std::env::current_exe().context("locating the airlock binary")?;
        let sandbox = LocalSandbox::over_fs(key, &spec, LocalConfig::new(exe), Arc::clone(fs))
            .map_err(anyhow::Error::msg)
            .context("opening the work dir")?;
        Ok(Some(Transfers {
            sandbox,
            spec,
            puts,
            gets,
        }))
    }

    /// Copies every `--put` in, within the `files_in` caps.
    pub async fn put_all(&self) -> anyhow::Result<()> {
        let caps: TransferLimits = *self.spec.files_in();
        if self.puts.len() as u64 > caps.max_files {
            bail!(
                "--put: {} files, above max_files ({})",
                self.puts.len(),
                caps.max_files
            );
        }
        let mut total = 0u64;
        for (local, guest) in &self.puts {
            let mut data = Vec::new();
            std::fs::File::open(local)
                .with_context(|| format!("--put: opening {}", local.display()))?
                .take(caps.max_bytes_per_file + 1)
                .read_to_end(&mut data)
                .with_context(|| format!("--put: reading {}", local.display()))?;
            if data.len() as u64 > caps.max_bytes_per_file {
                bail!(
                    "--put {}: above max_bytes_per_file ({})",
                    local.display(),
                    caps.max_bytes_per_file
                );
            }
            total += data.len() as u64;
            if total > caps.max_total_bytes {
                bail!("--put: above max_total_bytes ({})", caps.max_total_bytes);
            }
            self.sandbox
                .write_file(self.spec.work_dir(), guest, &data)
                .await
                .with_context(|| format!("--put {guest}"))?;
        }
        Ok(())
    }

    /// Collects every `--get`; each failure is reported on stderr. True when all landed.
    pub async fn get_all(&self) -> bool {
        let mut ok = true;
        for (guest, local) in &self.gets {
            if let Err(e) = self.get_one(guest, local).await {
                eprintln!("airlock: --get {guest}: {e:#}");
                ok = false;
            }
        }
        ok
    }

    async fn get_one(&self, guest: &GuestRelPath, local: &Path) -> anyhow::Result<()> {
        let name = local
            .file_name()
            .and_then(|n| n.to_str())
            .context("LOCAL must end in a UTF-8 file name")?;
        let parent = match local.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let sink = FileSystemSink::new(&parent)
            .with_context(|| format!("opening the destination directory {}", parent.display()))?;
        let out = DeclaredOutput::new(guest.clone(), "application/octet-stream").named(name);
        let got = collect_outputs(
            &self.sandbox,
            &self.spec,
            &[out],
            Some(&sink),
            CollectContext::default(),
        )
        .await?;
        match got.first() {
            Some(Collected::Landed(_)) => Ok(()),
            other => bail!("nothing landed ({other:?})"),
        }
    }
}
