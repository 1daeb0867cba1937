//! The files suites: files in (seen by the guest's commands), files out (exact, bounded), and
//! deletion (remove and reclaim). Every suite works in a fresh scratch directory.

use std::time::Duration;

use airlock_policy::GuestRelPath;

use super::report::{check, ConformanceReport};
use super::scratch::Scratch;
use crate::sandbox::{ExecOptions, Sandbox, SandboxError};

async fn cat(
    sandbox: &dyn Sandbox,
    work_dir: &str,
    p: &GuestRelPath,
) -> Result<Option<String>, String> {
    let argv = vec!["cat".to_owned(), p.under(work_dir)];
    let o = sandbox
        .exec(&argv, &ExecOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok((o.exit_code == Some(0)).then_some(o.stdout))
}

/// Probes `write_file`, checking what landed through `exec` + `cat` (exec and files_in are
/// what every backend serves).
pub async fn files_in_suite(sandbox: &dyn Sandbox, work_dir: &str) -> ConformanceReport {
    let mut r = ConformanceReport::new("files_in");
    let s = match Scratch::new() {
        Ok(s) => s,
        Err(e) => {
            r.record("scratch", "the suite needs a fresh directory", Err(e));
            return r;
        }
    };
    let res = async {
        let p = s.path("in.txt")?;
        sandbox
            .write_file(work_dir, &p, b"hello")
            .await
            .map_err(|e| e.to_string())?;
        let seen = cat(sandbox, work_dir, &p).await?;
        check(seen.as_deref() == Some("hello"), || {
            format!("guest read {seen:?}")
        })
    }
    .await;
    r.record(
        "write_visible_to_guest",
        "a file written in is the file the guest's commands read",
        res,
    );

    let res = async {
        let p = s.path("bytes.bin")?;
        let data: Vec<u8> = (0..=255u8).cycle().take(1024).collect();
        sandbox
            .write_file(work_dir, &p, &data)
            .await
            .map_err(|e| e.to_string())?;
        let argv = vec!["cat".to_owned(), p.under(work_dir)];
        let o = sandbox
            .exec(&argv, &ExecOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        check(o.exit_code == Some(0) && o.stdout_raw == data, || {
            format!(
                "exit {:?}, {} bytes back, first difference at {:?}",
                o.exit_code,
                o.stdout_raw.len(),
                o.stdout_raw.iter().zip(&data).position(|(a, b)| a != b)
            )
        })
    }
    .await;
    r.record(
        "every_byte_value_exact",
        "all 256 byte values land and come back through a command's output exactly, never as replacement text",
        res,
    );

    let res = async {
        let p = s.path("a/b/c.txt")?;
        sandbox
            .write_file(work_dir, &p, b"deep")
            .await
            .map_err(|e| e.to_string())?;
        let seen = cat(sandbox, work_dir, &p).await?;
        check(seen.as_deref() == Some("deep"), || {
            format!("guest read {seen:?}")
        })
    }
    .await;
    r.record(
        "parents_created",
        "a nested path lands without the caller creating its parents",
        res,
    );

    let res = async {
        let p = s.path("over.txt")?;
        sandbox
            .write_file(work_dir, &p, b"first-and-longer")
            .await
            .map_err(|e| e.to_string())?;
        sandbox
            .write_file(work_dir, &p, b"second")
            .await
            .map_err(|e| e.to_string())?;
        let seen = cat(sandbox, work_dir, &p).await?;
        check(seen.as_deref() == Some("second"), || {
            format!("guest read {seen:?}")
        })
    }
    .await;
    r.record(
        "overwrite_replaces",
        "a second write replaces the file, leaving no tail of the first",
        res,
    );

    let res = async {
        let f = s.path("plain")?;
        sandbox
            .write_file(work_dir, &f, b"x")
            .await
            .map_err(|e| e.to_string())?;
        let under = s.path("plain/child")?;
        let out = sandbox.write_file(work_dir, &under, b"y").await;
        check(out.is_err(), || {
            "a write through a regular file as parent succeeded".to_owned()
        })
    }
    .await;
    r.record(
        "file_parent_refused",
        "a path through a non-directory is refused, not coerced",
        res,
    );

    let res = async {
        let inside = s.path("dir/x")?;
        sandbox
            .write_file(work_dir, &inside, b"x")
            .await
            .map_err(|e| e.to_string())?;
        let dir = s.path("dir")?;
        let out = sandbox.write_file(work_dir, &dir, b"y").await;
        let still = cat(sandbox, work_dir, &inside).await?;
        check(out.is_err() && still.as_deref() == Some("x"), || {
            format!("write over a directory: {out:?}, child now {still:?}")
        })
    }
    .await;
    r.record(
        "directory_not_replaced",
        "a write never replaces a directory (and what is in it)",
        res,
    );

    s.cleanup(sandbox, work_dir).await;
    r
}

/// Probes `stat` and `read_file` (seeding with `write_file`).
pub async fn files_out_suite(sandbox: &dyn Sandbox, work_dir: &str) -> ConformanceReport {
    let mut r = ConformanceReport::new("files_out");
    let s = match Scratch::new() {
        Ok(s) => s,
        Err(e) => {
            r.record("scratch", "the suite needs a fresh directory", Err(e));
            return r;
        }
    };
    let bytes: Vec<u8> = (0u8..=255).chain([0, 0, 255]).collect();
    let size = bytes.len() as u64;

    let res = async {
        let p = s.path("out.bin")?;
        sandbox
            .write_file(work_dir, &p, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        let got = sandbox
            .read_file(work_dir, &p, size)
            .await
            .map_err(|e| e.to_string())?;
        check(got == bytes, || {
            format!("read {} bytes, differing", got.len())
        })
    }
    .await;
    r.record(
        "read_exact_bytes",
        "an artifact comes back byte for byte, binary included",
        res,
    );

    let res = async {
        let p = s.path("out.bin")?;
        let st = sandbox
            .stat(work_dir, &p)
            .await
            .map_err(|e| e.to_string())?;
        check(
            st.is_some_and(|st| st.size == Some(size) && !st.is_dir),
            || format!("{st:?}"),
        )
    }
    .await;
    r.record(
        "stat_reports_size",
        "caps are checked from stat before any byte is read",
        res,
    );

    let res = async {
        let p = s.path("nothing-here")?;
        let st = sandbox
            .stat(work_dir, &p)
            .await
            .map_err(|e| e.to_string())?;
        check(st.is_none(), || format!("{st:?}"))
    }
    .await;
    r.record(
        "stat_missing_is_none",
        "an absent output is told apart from a present one",
        res,
    );

    let res = async {
        let p = s.path("out.bin")?;
        match sandbox.read_file(work_dir, &p, size - 1).await {
            Err(SandboxError::TooLarge { .. }) => Ok(()),
            Ok(got) => Err(format!("returned {} bytes instead of refusing", got.len())),
            Err(e) => Err(format!("wrong error: {e}")),
        }
    }
    .await;
    r.record(
        "read_over_bound_refused",
        "an over-cap file is refused, never silently truncated into a partial artifact",
        res,
    );

    let res = async {
        let p = s.path("nothing-here")?;
        match sandbox.read_file(work_dir, &p, 1024).await {
            Err(SandboxError::NotFound { .. }) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    }
    .await;
    r.record(
        "read_missing_not_found",
        "a missing file is a NotFound, not empty bytes",
        res,
    );

    s.cleanup(sandbox, work_dir).await;
    r
}

/// Probes `remove` and `reclaim` (checking through `exec` + `cat`).
pub async fn files_delete_suite(sandbox: &dyn Sandbox, work_dir: &str) -> ConformanceReport {
    let mut r = ConformanceReport::new("files_delete");
    let s = match Scratch::new() {
        Ok(s) => s,
        Err(e) => {
            r.record("scratch", "the suite needs a fresh directory", Err(e));
            return r;
        }
    };
    let t = Duration::from_secs(10);

    let res = async {
        let p = s.path("gone.txt")?;
        sandbox
            .write_file(work_dir, &p, b"x")
            .await
            .map_err(|e| e.to_string())?;
        sandbox
            .remove(work_dir, &p)
            .await
            .map_err(|e| e.to_string())?;
        let seen = cat(sandbox, work_dir, &p).await?;
        check(seen.is_none(), || format!("still readable: {seen:?}"))
    }
    .await;
    r.record(
        "remove_deletes",
        "a removal that reports success has removed the file",
        res,
    );

    let res = async {
        let p = s.path("never-was")?;
        match sandbox.remove(work_dir, &p).await {
            Ok(()) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    }
    .await;
    r.record(
        "remove_missing_is_success",
        "removal is idempotent: cleanup of something already gone must not report a failure",
        res,
    );

    let res = async {
        let dir = s.path("call")?;
        let a = s.path("call/a.txt")?;
        let b = s.path("call/sub/b.txt")?;
        let keep = s.path("sibling.txt")?;
        for p in [&a, &b, &keep] {
            sandbox
                .write_file(work_dir, p, b"x")
                .await
                .map_err(|e| e.to_string())?;
        }
        sandbox
            .reclaim(work_dir, &dir, t)
            .await
            .map_err(|e| e.to_string())?;
        let a_seen = cat(sandbox, work_dir, &a).await?;
        let b_seen = cat(sandbox, work_dir, &b).await?;
        let kept = cat(sandbox, work_dir, &keep).await?;
        check(
            a_seen.is_none() && b_seen.is_none() && kept.as_deref() == Some("x"),
            || format!("after reclaim: a={a_seen:?} b={b_seen:?} sibling={kept:?}"),
        )
    }
    .await;
    r.record(
        "reclaim_removes_tree_only",
        "a call's directory goes with everything under it, and nothing beside it",
        res,
    );

    let res = async {
        let dir = s.path("absent-dir")?;
        sandbox
            .reclaim(work_dir, &dir, t)
            .await
            .map_err(|e| e.to_string())
    }
    .await;
    r.record(
        "reclaim_missing_is_success",
        "cleanup runs in a finally and must not report a second failure",
        res,
    );

    s.cleanup(sandbox, work_dir).await;
    r
}
