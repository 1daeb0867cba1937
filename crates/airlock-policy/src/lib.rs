//! airlock-policy: the pure data and decisions of airlock's policy layer.
//!
//! The vocabulary (the isolation ladder, capabilities, egress modes, OS families, identities,
//! transfer limits, isolation scopes), the workload spec and the key that addresses a sandbox,
//! a backend's declarations with each field's own silence rule, the one decision function
//! with its fixed check order and named refusals, coded disposal failures, and `policy.toml`.
//! No async and no I/O: the router (`airlock-router`) does the acting.

pub mod capability;
mod checked;
pub mod decide;
pub mod declarations;
pub mod disposal;
pub mod egress;
mod file_error;
pub mod guest_path;
pub mod identity;
pub mod isolation;
pub mod key;
pub mod limits;
pub mod os_family;
pub mod policy_file;
mod policy_sections;
pub mod reclaim;
pub mod refusal;
pub mod restricted;
pub mod run_limits;
pub mod scope;
pub mod spec;
pub mod tenant_quota;
mod vocab;

pub use capability::{default_capabilities, Capability};
pub use decide::{decide, BackendProfile, Decision, HostPolicy};
pub use declarations::BackendDeclarations;
pub use disposal::{DisposalCode, DisposalFailure};
pub use egress::Egress;
pub use guest_path::{GuestPathError, GuestRelPath};
pub use identity::Identity;
pub use isolation::Isolation;
pub use key::{CallerContext, ContextFn, KeyError, SandboxKey};
pub use limits::{Direction, SandboxLimits, TransferField, TransferLimits};
pub use os_family::OsFamily;
pub use policy_file::{Policy, PolicyFileError, ServerLimits, MAX_POLICY_BYTES};
pub use reclaim::FailedReclaimPolicy;
pub use refusal::{CeilingOwner, Refusal};
pub use restricted::RestrictedProfile;
pub use run_limits::RunLimits;
pub use scope::IsolationScope;
pub use spec::{SandboxSpec, SandboxSpecBuilder, SpecError};
pub use tenant_quota::TenantQuota;
pub use vocab::VocabError;
