//! What an import reads: an OCI image layout (a directory, or an archive of one), a Docker
//! archive (`docker save`, `podman save --format docker-archive`), a root tarball (`mmdebstrap
//! … root.tar`, `tar -C root -c .`), or a plain root directory.
//!
//! Archives are first unpacked into the import's staging area with the same applier as
//! layers (the same bounds and the same in-root rules); what they hold decides what they are.
//! Every document is read with a cap, every blob is checked against the digest that names it.
pub mod detect;
pub mod dir;
pub mod docker;
pub mod layout_files;
pub mod layout_plan;
pub mod oci;

pub use detect::plan;
pub use layout_files::{blob_path, open_file, read_blob, read_capped};
pub use layout_plan::{Format, LayerRef, Plan, MAX_DOC_BYTES, MAX_LAYERS};
