//! `airlock token add|rm|ls --token-file F`: a tenants file's tokens (see
//! `airlock_server::tenancy::tokens`), and the SIGHUP task that makes `serve` read it again.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use airlock_server::tenancy::tenant::Tenant;
use airlock_server::tenancy::tokens::{self, Entry};
use airlock_server::Auth;
use anyhow::{bail, Context};

/// `airlock token`.
#[derive(Debug, clap::Args)]
pub struct TokenOpts {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Make a token for tenant NAME, print it once, and store only its SHA-256 digest.
    Add {
        /// The tenant (a-z, 0-9, '-', '_'; at most 64).
        name: String,
        /// The tenants file (made, mode 0600, when missing).
        #[arg(long)]
        token_file: PathBuf,
    },
    /// Remove every token of tenant NAME.
    Rm {
        /// The tenant.
        name: String,
        /// The tenants file.
        #[arg(long)]
        token_file: PathBuf,
    },
    /// List the tenants and how many tokens each holds (never a secret).
    Ls {
        /// The tenants file.
        #[arg(long)]
        token_file: PathBuf,
    },
}

pub fn token(opts: TokenOpts) -> anyhow::Result<ExitCode> {
    match opts.action {
        Action::Add { name, token_file } => add(&name, &token_file),
        Action::Rm { name, token_file } => rm(&name, &token_file),
        Action::Ls { token_file } => ls(&token_file),
    }
}

fn add(name: &str, file: &std::path::Path) -> anyhow::Result<ExitCode> {
    tokens::check_name(name)?;
    let mut entries = tokens::load(file)?;
    let secret = tokens::generate()?;
    let added_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    entries.push(Entry {
        tenant: Tenant::new(name),
        digest: tokens::digest(secret.as_bytes()),
        added_unix,
    });
    tokens::store(file, &entries)?;
    println!("{secret}");
    eprintln!(
        "tenant {name}: token added to {} (shown once; a running server takes it on SIGHUP)",
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn rm(name: &str, file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let mut entries = tokens::load(file)?;
    let before = entries.len();
    entries.retain(|e| e.tenant.as_str() != name);
    if entries.len() == before {
        bail!("tenant {name:?} has no token in {}", file.display());
    }
    tokens::store(file, &entries)?;
    eprintln!(
        "tenant {name}: {} token(s) removed (a running server drops them on SIGHUP)",
        before - entries.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn ls(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let entries = tokens::load(file).with_context(|| format!("reading {}", file.display()))?;
    let mut by: std::collections::BTreeMap<&str, (usize, u64)> = Default::default();
    for e in &entries {
        let slot = by.entry(e.tenant.as_str()).or_default();
        slot.0 += 1;
        slot.1 = slot.1.max(e.added_unix);
    }
    for (name, (n, newest)) in by {
        println!("{name}\t{n} token(s)\tnewest added {newest}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Read the tenants file again on every SIGHUP (a file that does not parse leaves the tokens
/// in force as they were, and says why).
pub async fn reload_on_hangup(auth: Auth) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::error!("cannot install the SIGHUP handler; tokens are not reloadable");
        return;
    };
    while hup.recv().await.is_some() {
        match auth.reload() {
            Ok(Some(n)) => tracing::info!(tokens = n, "SIGHUP: tenants file read again"),
            Ok(None) => tracing::info!("SIGHUP: a single token is not reloaded"),
            Err(e) => {
                tracing::error!(error = %e, "SIGHUP: tenants file not taken; the tokens in force stay")
            }
        }
    }
}
