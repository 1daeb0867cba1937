//! What the broker reads from a guest, reachable from `fuzz/` (hidden from the docs; not an
//! API): the `ready` attestation and the `refused` notification, a kernel's `display`
//! notifications and a cell's answer, each through the function the broker runs on it.
use std::collections::BTreeMap;

use serde_json::Value;

use crate::kernel::cell;
use crate::kernel::display::Displays;
use crate::result::{CellValue, DisplayItem};

/// The `ready` notification's params checked against `broker_ns`, as a run and a warm pool do.
pub fn ready(params: Option<Value>, broker_ns: &BTreeMap<String, String>) -> Result<(), String> {
    crate::run::relay::check_ready(params, broker_ns)
}

/// The message a `refused` notification's params become.
pub fn refused(params: Option<Value>) -> String {
    crate::run::relay::refusal_of(params)
}

/// A cell's `display` notifications, in order: the items kept and the number dropped, or the
/// protocol error that ends the kernel (at the first malformed one).
pub fn displays(all: Vec<Option<Value>>) -> Result<(Vec<DisplayItem>, u32), String> {
    let mut d = Displays::default();
    for params in all {
        d.offer(params)?;
    }
    Ok((d.items, d.dropped))
}

/// A cell's answer (its `execute` result) as kept: the exit code the guest intends, and the
/// value within its caps.
pub fn cell_answer(result: Option<Value>) -> (Option<i64>, Option<CellValue>) {
    let (hint, value) = cell::answer(result);
    (hint.and_then(|h| h.exit_code), value.map(cell::bounded))
}

/// Longest `repr` a cell's value keeps.
pub const MAX_REPR: usize = cell::MAX_REPR;
/// Largest encoded JSON copy a cell's value keeps.
pub const MAX_JSON: usize = cell::MAX_JSON;
