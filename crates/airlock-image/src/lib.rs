//! airlock-image: images as read-only roots for airlock's sandboxes.
//!
//! [`Store::import`] reads an OCI image layout (a directory or an archive: `podman save
//! --format oci-dir|oci-archive`, `skopeo copy … oci:`), a Docker archive, a root tarball or a
//! plain root directory (`mmdebstrap`), checks every blob against its digest, and unpacks it
//! once into a content-addressed root (`roots/<chain id>`) that every sandbox using it shares
//! read-only. [`Store::get`] hands a sandbox its root and config.
//!
//! The input is hostile until proven otherwise: the tar reader ([`tar`]) bounds every header,
//! name and size before reading what follows; the applier ([`unpack`]) resolves every path
//! inside the root being built (a planted `etc -> /etc` or `../../x` cannot lead out), refuses
//! `..` paths and device nodes (dropping those under `/dev`), strips set-id bits, never applies
//! ownership, and honours whiteouts only beneath the root; [`Bounds`] caps bytes, entries, depth
//! and name length for the whole import. Raw syscalls live in `airlock-jail` (its no-follow
//! `dirfd` primitives); this crate has no `unsafe`.
#![forbid(unsafe_code)]

pub mod bounds;
pub mod build;
pub mod config;
pub mod digest;
mod error;
mod finalize;
mod image;
pub mod source;
mod store;
pub mod tar;
pub mod unpack;

pub use bounds::Bounds;
pub use config::ImageConfig;
pub use error::{ImageError, Result};
pub use image::{default_name, valid_name, Image, Record};
pub use source::Format;
pub use store::{Imported, Store};
pub use unpack::Report;
