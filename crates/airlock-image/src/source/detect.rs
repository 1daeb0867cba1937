//! Which kind of layout a directory holds, and its plan.
use airlock_jail::dirfd::{DirFd, FileKind};

use super::layout_plan::Plan;
use super::{docker, oci};
use crate::error::Result;

/// The plan of the layout in `dir`, if it is one.
pub fn plan(dir: &DirFd) -> Result<Option<Plan>> {
    if exists(dir, "oci-layout") {
        return oci::plan(dir).map(Some);
    }
    if exists(dir, "manifest.json") {
        return docker::plan(dir).map(Some);
    }
    Ok(None)
}

fn exists(dir: &DirFd, name: &str) -> bool {
    dir.stat_at(name).is_ok_and(|m| m.kind == FileKind::Regular)
}
