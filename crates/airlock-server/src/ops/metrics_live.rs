//! The gauges read at scrape time, from what the server holds then: sandboxes live and paused
//! per tenant, and each live sandbox's disk (its tmpfs, through `fstatfs` on its `/work`
//! handle) and memory (its machine's cgroup, when it has one). Nothing is made or waited for:
//! a sandbox whose root is not made yet reports no disk, one without a machine cgroup no
//! memory. The series are bounded by `--max-sandboxes` and the paused records the state
//! directory holds.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::registry::sandboxes::{Held, Sandboxes};

/// The registry's view of the server's sandboxes (empty until [`crate::ops::metrics::Metrics::watch`]).
#[derive(Debug)]
pub(crate) struct Live {
    sandboxes: Arc<OnceLock<Arc<Sandboxes>>>,
    /// Every tenant that held a sandbox since the start: its gauges go to 0, not away, when
    /// it holds none.
    seen: Mutex<BTreeSet<String>>,
}

impl Live {
    pub(crate) fn new(sandboxes: Arc<OnceLock<Arc<Sandboxes>>>) -> Self {
        Live {
            sandboxes,
            seen: Mutex::new(BTreeSet::new()),
        }
    }
}

type Tenant = [(&'static str, String); 1];
type PerSandbox = [(&'static str, String); 2];

/// The tenant a paused record belongs to (a record from before tenants: the single one).
fn paused_tenant(r: &crate::state_dir::PausedRecord) -> String {
    r.tenant().as_str().to_owned()
}

fn per_sandbox(h: &Held) -> PerSandbox {
    [
        ("sandbox_id", h.id.clone()),
        ("tenant", h.tenant.as_str().to_owned()),
    ]
}

fn gauge<S, M>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    family: &Family<S, M>,
) -> Result<(), std::fmt::Error>
where
    Family<S, M>: EncodeMetric,
{
    let metric = encoder.encode_descriptor(name, help, None, family.metric_type())?;
    family.encode(metric)
}

/// Counts per tenant: every tenant `seen` (the single one always) and every one that has a
/// sandbox, live or paused, named in both.
fn per_tenant(
    sbs: &Sandboxes,
    held: &[Arc<Held>],
    seen: &mut BTreeSet<String>,
) -> [Family<Tenant, Gauge>; 2] {
    seen.insert(crate::tenancy::tenant::SINGLE.to_owned());
    let mut counts: BTreeMap<String, (i64, i64)> =
        seen.iter().map(|t| (t.clone(), (0, 0))).collect();
    for h in held {
        counts.entry(h.tenant.as_str().to_owned()).or_default().0 += 1;
    }
    for r in sbs.paused_records() {
        counts.entry(paused_tenant(&r)).or_default().1 += 1;
    }
    seen.extend(counts.keys().cloned());
    let live = Family::<Tenant, Gauge>::default();
    let paused = Family::<Tenant, Gauge>::default();
    for (tenant, (l, p)) in counts {
        live.get_or_create(&[("tenant", tenant.clone())]).set(l);
        paused.get_or_create(&[("tenant", tenant)]).set(p);
    }
    [live, paused]
}

/// Each live sandbox's disk in use and memory charged, where there is something to read.
fn usage(held: &[Arc<Held>]) -> [Family<PerSandbox, Gauge>; 2] {
    let disk = Family::<PerSandbox, Gauge>::default();
    let memory = Family::<PerSandbox, Gauge>::default();
    for h in held {
        let u = h.sandbox.usage_now();
        let labels = per_sandbox(h);
        if let Some(d) = u.disk {
            disk.get_or_create(&labels)
                .set(i64::try_from(d.bytes_used).unwrap_or(i64::MAX));
        }
        if let Some(m) = u.memory_bytes {
            memory
                .get_or_create(&labels)
                .set(i64::try_from(m).unwrap_or(i64::MAX));
        }
    }
    [disk, memory]
}

impl Collector for Live {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(sbs) = self.sandboxes.get() else {
            return Ok(());
        };
        let held = sbs.held();
        let [live, paused] = {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            per_tenant(sbs, &held, &mut seen)
        };
        gauge(
            &mut encoder,
            "airlock_sandboxes_live",
            "Sandboxes held live now, by tenant.",
            &live,
        )?;
        gauge(
            &mut encoder,
            "airlock_sandboxes_paused",
            "Sandboxes paused now (records in the state directory), by tenant.",
            &paused,
        )?;
        let [disk, memory] = usage(&held);
        gauge(
            &mut encoder,
            "airlock_sandbox_disk_used_bytes",
            "Bytes in use on a live sandbox's disk (the tmpfs behind /work, /tmp, /dev/shm).",
            &disk,
        )?;
        gauge(
            &mut encoder,
            "airlock_sandbox_memory_bytes",
            "Memory a live sandbox's machine cgroup charges (init and background processes).",
            &memory,
        )
    }
}
