//! `airlock doctor`: each isolation layer, available or not, with the reason and the fix.
//!
//! The kernel probes live in `airlock_jail::doctor`; the sandbox's root is checked here by
//! assembling a real one with the same stage every run uses.
use std::process::ExitCode;

use airlock_broker::{fs_policy, DataBounds, RootSpec, SandboxFs};
use airlock_jail::doctor::{check_all, LayerReport};

/// The bound the probe's writable tmpfs is given (and must report back).
const PROBE_BYTES: u64 = 8 << 20;
const PROBE_INODES: u64 = 512;

/// The layers every run needs: the kernel's ([`airlock_jail::doctor::REQUIRED`]) and a
/// sandbox root. Without one of them a run is `refused`. The others (cgroups, kvm) strengthen
/// or speed up runs where present; `--cpus` alone needs the cpu cgroup.
fn is_required(layer: &str) -> bool {
    layer == "sandbox_root" || airlock_jail::doctor::REQUIRED.contains(&layer)
}

/// Exits 1 exactly when a run would be refused (a required layer is missing), else 0.
pub fn doctor(json: bool) -> ExitCode {
    let mut layers: Vec<LayerReport> = check_all();
    let after_core = layers
        .iter()
        .position(|l| l.layer == "landlock")
        .map_or(layers.len(), |i| i + 1);
    layers.insert(after_core, sandbox_root());
    let required = |l: &LayerReport| is_required(&l.layer);
    let refused = layers.iter().any(|l| required(l) && !l.available);
    if json {
        let with_required: Vec<serde_json::Value> = layers
            .iter()
            .map(|l| {
                let mut v = serde_json::to_value(l).unwrap_or_default();
                v["required"] = required(l).into();
                v
            })
            .collect();
        match serde_json::to_string_pretty(&with_required) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("airlock: {e}"),
        }
    } else {
        print_table(&layers, required);
        if refused {
            println!("\na required layer is MISSING: every run would be refused (fixes above)");
        } else {
            println!("\nevery required layer is available: runs have full isolation");
        }
    }
    if refused {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// One aligned row per layer (status, required or optional, name, detail), then its fix.
fn print_table(layers: &[LayerReport], required: impl Fn(&LayerReport) -> bool) {
    let width = layers.iter().map(|l| l.layer.len()).max().unwrap_or(0);
    println!(
        "{:<7}  {:<8}  {:<width$}  detail",
        "status", "needed", "layer"
    );
    for l in layers {
        let mark = if l.available { "ok" } else { "MISSING" };
        let need = if required(l) { "required" } else { "optional" };
        println!("{mark:<7}  {need:<8}  {:<width$}  {}", l.layer, l.detail);
        if let Some(fix) = l.fix.as_deref().filter(|_| !l.available) {
            println!("{:<7}  {:<8}  {:<width$}  fix: {fix}", "", "", "");
        }
    }
}

/// Assemble a sandbox root (read-only nosuid nodev system binds, own /proc and /dev, one
/// bounded tmpfs) and read its bound back.
fn sandbox_root() -> LayerReport {
    let outcome = std::env::current_exe()
        .map_err(|e| e.to_string())
        .and_then(|exe| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let spec = RootSpec {
                binds: fs_policy::root_binds(None, &[]),
                data: DataBounds {
                    bytes: PROBE_BYTES,
                    inodes: PROBE_INODES,
                },
                image: None,
            };
            rt.block_on(SandboxFs::create(&exe, spec))
                .map_err(|e| e.to_string())
        });
    let (available, detail) = match outcome {
        Ok(fs) => match fs.usage() {
            Some(u) if u.bytes_total == PROBE_BYTES => (
                true,
                format!(
                    "ok: assembled in its own user and mount namespaces: system dirs bound \
                     read-only nosuid nodev, own /proc and /dev, /work /tmp /dev/shm on one \
                     tmpfs bounded at {} MiB and {} entries; guest's host identity: {}",
                    u.bytes_total >> 20,
                    u.inodes_total,
                    fs.owner().map_or_else(
                        || "the invoking user (single-entry map)".to_string(),
                        |o| format!("uid {} gid {} (owns nothing)", o.uid, o.gid)
                    )
                ),
            ),
            other => (
                false,
                format!("the writable tmpfs does not report its bound ({other:?})"),
            ),
        },
        Err(e) => (false, format!("failed: {e}")),
    };
    LayerReport {
        layer: "sandbox_root".into(),
        available,
        detail,
        fix: (!available).then(|| {
            "every run needs this: a user namespace whose mount namespace allows tmpfs, a fresh \
             procfs and detached bind mounts (open_tree/move_mount/mount_setattr, Linux >= \
             5.12); see the userns and mountns fixes, and docs/deploy.md for the settings a \
             container needs"
                .into()
        }),
    }
}
