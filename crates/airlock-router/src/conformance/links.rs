//! The links suite: what the pull surface says about a link the guest planted. Ported from
//! maf-sandbox's FILES_OUT probes, which caught what the files suites here did not: a stat or a
//! listing that reported a link as "not a directory, size unknown" (the same answer as a FIFO),
//! so a caller above the backend could not tell an escape from a device. The guest plants the
//! links (`ln -s`, through `exec`), so the suite runs against a backend with a real guest.

use airlock_policy::GuestRelPath;

use super::report::{check, ConformanceReport};
use super::scratch::Scratch;
use crate::sandbox::{EntryKind, ExecOptions, Sandbox, SandboxError};

async fn ln(sandbox: &dyn Sandbox, target: &str, link: &str) -> Result<(), String> {
    let argv = ["ln", "-s", target, link].map(str::to_owned);
    let o = sandbox
        .exec(&argv, &ExecOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    check(o.exit_code == Some(0), || {
        format!("ln -s failed: {}", o.stderr)
    })
}

/// The layout: `real/secret.txt`, `link-file -> real/secret.txt`, `link-dir -> real`.
async fn plant(sandbox: &dyn Sandbox, work_dir: &str, s: &Scratch) -> Result<(), String> {
    let secret = s.path("real/secret.txt")?;
    sandbox
        .write_file(work_dir, &secret, b"not through a link")
        .await
        .map_err(|e| e.to_string())?;
    ln(
        sandbox,
        &secret.under(work_dir),
        &s.path("link-file")?.under(work_dir),
    )
    .await?;
    ln(
        sandbox,
        &s.path("real")?.under(work_dir),
        &s.path("link-dir")?.under(work_dir),
    )
    .await
}

async fn stat_names_the_link(sb: &dyn Sandbox, wd: &str, p: &GuestRelPath) -> Result<(), String> {
    let st = sb.stat(wd, p).await.map_err(|e| e.to_string())?;
    check(
        st.is_some_and(|st| st.kind == EntryKind::Symlink && st.size.is_none() && !st.is_dir),
        || format!("{st:?}"),
    )
}

async fn listing_names_the_link(sb: &dyn Sandbox, wd: &str, s: &Scratch) -> Result<(), String> {
    let entries = sb.list(wd, Some(&s.dir)).await.map_err(|e| e.to_string())?;
    let link = entries.iter().find(|e| e.name == "link-file");
    check(
        link.is_some_and(|e| e.stat.kind == EntryKind::Symlink && e.stat.size.is_none()),
        || format!("{entries:?}"),
    )
}

fn refused<T: std::fmt::Debug>(got: Result<T, SandboxError>) -> Result<(), String> {
    match got {
        Err(SandboxError::NotConfined { .. }) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

/// Probes `stat`, `list` and `read_file` against links the guest planted.
pub async fn links_suite(sandbox: &dyn Sandbox, work_dir: &str) -> ConformanceReport {
    let mut r = ConformanceReport::new("links");
    let s = match Scratch::new() {
        Ok(s) => s,
        Err(e) => {
            r.record("scratch", "the suite needs a fresh directory", Err(e));
            return r;
        }
    };
    if let Err(e) = plant(sandbox, work_dir, &s).await {
        r.record(
            "plant",
            "the guest plants the links the suite attacks",
            Err(e),
        );
        return r;
    }
    let res = async { stat_names_the_link(sandbox, work_dir, &s.path("link-file")?).await }.await;
    r.record(
        "a_link_is_named_a_link",
        "a caller must tell an escape from a FIFO; a link's size is its target's length, not data",
        res,
    );
    let res = listing_names_the_link(sandbox, work_dir, &s).await;
    r.record(
        "a_listing_names_its_links",
        "a name handed back with its type erased is a name read without the warning",
        res,
    );
    let res = async {
        refused(
            sandbox
                .read_file(work_dir, &s.path("link-file")?, 1024)
                .await,
        )
    }
    .await;
    r.record(
        "a_link_is_never_read",
        "a link is refused wherever it points, never followed",
        res,
    );
    let res = async {
        refused(
            sandbox
                .stat(work_dir, &s.path("link-dir/secret.txt")?)
                .await,
        )
    }
    .await;
    r.record(
        "stat_through_a_linked_parent",
        "with out -> /etc, out/hostname would stat as a real file: a type and size from outside",
        res,
    );
    s.cleanup(sandbox, work_dir).await;
    r
}
