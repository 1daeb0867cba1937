//! The host-tool registry: the one door every `call_tool` from a sandbox goes through.
//!
//! A host tool runs in the host process, with the host's authority, driven by model-written
//! code, so the surface is narrow by construction:
//!
//! - [`HostToolRegistry`] starts empty: nothing is callable until a developer registers it.
//! - A [`HostTool`] must answer every information-flow leg in its [`ToolDeclaration`]:
//!   `source`, `sink` and `identity`, with no defaults (`None` is an answer: "not that role").
//! - Registration is the only place a declaration is read; [`HostToolRegistry::seal`]
//!   freezes the registry into a [`SealedRegistry`], after which nothing can be added or
//!   changed.
//! - `allowed_identities` defaults to `{app}`: a `user` tool is refused at registration
//!   unless the host opted in; a tool declaring no identity is always allowed. `app` is not
//!   the safe option, only the declared one: least privilege comes from what is registered.
//! - Each run ([`HostToolRun`]) is bounded by a call cap (refusals counted) and by response
//!   caps that reuse [`TransferLimits`](airlock_policy::TransferLimits): bytes per response,
//!   bytes per run, responses per run.
//! - Arguments are validated host-side against each tool's JSON Schema, never in a guest shim.
//! - Every refusal is a structured [`Denial`] (code, reason, retryable) a model can act on;
//!   an unknown tool gets a sanitized refusal that echoes only a bounded, printable name.
//! - Every call, served or refused, is a `HostToolCalled` observer event.

mod declaration;
mod denial;
mod registry;
mod run;

pub use declaration::{HostTool, ToolBody, ToolBodyError, ToolCall, ToolDeclaration, UserIdentity};
pub use denial::{Denial, DenialCode};
pub use registry::{
    HostToolLimits, HostToolRegistry, MintUser, RegisterError, SealedRegistry,
    DEFAULT_MAX_HOST_TOOL_CALLS_PER_RUN,
};
pub use run::HostToolRun;
