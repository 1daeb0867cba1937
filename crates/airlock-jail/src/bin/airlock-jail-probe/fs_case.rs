//! `landlock BASE`: builds BASE/{ro,rw,data,outside}, restricts to ro (read-only) + rw
//! (read-write) + data (files as data) and checks what is allowed and what is denied.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use airlock_jail::landlock::{self, FsPolicy};

use crate::report::{check, errno};

fn denied<T>(r: std::io::Result<T>, what: &str) -> bool {
    let kind = r.as_ref().err().map(std::io::Error::kind);
    check(
        &format!("{what} denied ({kind:?})"),
        kind == Some(ErrorKind::PermissionDenied),
    )
}

fn allowed<T>(r: std::io::Result<T>, what: &str) -> bool {
    let e = r.as_ref().err().map(ToString::to_string);
    check(&format!("{what} allowed ({e:?})"), r.is_ok())
}

/// Files as data: made, written, renamed and removed, never executed, never a socket node.
fn data_rights(data: &Path) -> bool {
    let mut ok = allowed(fs::write(data.join("f"), "d"), "create inside data");
    ok &= allowed(fs::create_dir(data.join("d")), "mkdir inside data");
    ok &= allowed(
        fs::rename(data.join("f"), data.join("d/f")),
        "rename within data",
    );
    ok &= allowed(fs::remove_file(data.join("d/f")), "remove inside data");
    ok &= allowed(
        std::os::unix::fs::symlink("true", data.join("link")),
        "symlink inside data",
    );
    ok &= denied(
        std::process::Command::new(data.join("true")).status(),
        "execute inside data",
    );
    ok &= denied(
        std::os::unix::net::UnixListener::bind(data.join("sock")),
        "a socket node inside data",
    );
    ok
}

pub(crate) fn landlock(args: &[String]) -> Result<bool, String> {
    let [base] = args else {
        return Err("landlock BASE".into());
    };
    let base = Path::new(base);
    let (ro, rw, out) = (base.join("ro"), base.join("rw"), base.join("outside"));
    let data = base.join("data");
    for d in [&ro, &rw, &out, &data] {
        fs::create_dir_all(d).map_err(|e| e.to_string())?;
    }
    fs::write(ro.join("f"), "ro").map_err(|e| e.to_string())?;
    fs::write(rw.join("f"), "rw").map_err(|e| e.to_string())?;
    fs::write(out.join("f"), "out").map_err(|e| e.to_string())?;
    // A program to try executing from the data dir (its own copy: the original is outside).
    fs::copy("/bin/true", data.join("true")).map_err(|e| e.to_string())?;
    let policy = FsPolicy {
        read_only: vec![ro.clone(), base.join("does-not-exist")],
        read_exec: vec!["/usr".into(), "/lib".into(), "/lib64".into()],
        read_write: vec![rw.clone()],
        data: vec![data.clone()],
    };
    let report = landlock::restrict(&policy).map_err(|e| e.to_string())?;
    println!("report {report:?}");
    let mut ok = check(
        "nonexistent path reported as skipped",
        report.skipped == [base.join("does-not-exist")],
    );
    ok &= check(&format!("abi {} >= 1", report.abi), report.abi >= 1);
    ok &= allowed(fs::read_to_string(ro.join("f")), "read inside read_only");
    ok &= denied(fs::write(ro.join("f"), "x"), "write inside read_only");
    ok &= denied(fs::write(ro.join("new"), "x"), "create inside read_only");
    ok &= denied(fs::read_to_string(out.join("f")), "read outside the policy");
    ok &= denied(fs::write(out.join("f"), "x"), "write outside the policy");
    ok &= denied(fs::read_dir(base), "list the parent of the policy paths");
    ok &= allowed(fs::read_to_string(rw.join("f")), "read inside read_write");
    ok &= allowed(fs::write(rw.join("new"), "x"), "create inside read_write");
    ok &= allowed(fs::remove_file(rw.join("new")), "remove inside read_write");
    ok &= denied(
        fs::rename(rw.join("f"), out.join("g")),
        "move out of read_write (refer)",
    );
    ok &= data_rights(&data);
    if report.abi >= 4 {
        ok &= denied(std::net::TcpListener::bind("127.0.0.1:0"), "tcp bind");
    }
    if report.abi >= 6 {
        // Signals to processes outside the sandbox are scoped away (our parent is outside).
        // SAFETY: signal 0 only checks permission.
        let r = unsafe { libc::kill(libc::getppid(), 0) };
        ok &= check(
            "kill(parent, 0) denied (signal scoping)",
            r == -1 && errno() == libc::EPERM,
        );
    }
    Ok(ok)
}
