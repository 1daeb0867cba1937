//! Writing archive entries into a root under construction, the way an attacker would not like:
//! every path normalised (`..` refused), every parent resolved inside the root
//! (`RESOLVE_IN_ROOT`: a symlink planted by an earlier entry, `etc -> /etc` or
//! `x -> ../../../etc/shadow`, lands inside the root), every final name created exclusively
//! with no link followed, set-id bits stripped, device nodes dropped (under `/dev`) or refused,
//! ownership never applied (everything belongs to whoever imports), whiteouts and opaque
//! directories honoured only beneath the root.
pub mod apply;
pub mod layer;
pub mod path;

pub use apply::{Applier, Report};
pub use layer::apply_layer;
pub use path::EntryPath;
