//! One bind of a sandbox's root, ready to be mounted.
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// A bind source: a detached copy of its mount tree with the system attributes in force.
pub(crate) struct Source {
    pub(crate) guest: PathBuf,
    pub(crate) tree: OwnedFd,
    pub(crate) dir: bool,
}
