//! The JSON-RPC face (WebSocket and stdio alike): a connection's session, its dispatch of
//! methods, each method's params parsed into the registry's requests and its answers and
//! errors written back, runs with their streamed output and relayed tool calls.
pub mod answers;
pub mod attached;
pub(crate) mod dir_api;
pub(crate) mod dispatch;
pub mod errors;
mod execute_sandbox;
pub(crate) mod expose_api;
pub(crate) mod files_api;
pub(crate) mod in_flight;
pub(crate) mod metadata;
pub(crate) mod outputs;
pub(crate) mod outputs_api;
pub mod params;
pub mod process_api;
pub mod process_methods;
pub mod process_params;
pub mod remote_tools;
pub mod reply;
pub(crate) mod run;
pub(crate) mod sandbox_list;
pub mod session;
pub mod snapshot_api;
pub mod spec;
pub mod spec_image;
pub mod tools;
pub mod transport;
