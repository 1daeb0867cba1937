//! Who is asking: tenants, the tokens that name them (minted, hashed, compared in constant
//! time), bearer authentication and the credential search that keeps a token from reaching a
//! guest, per-tenant request rates, and what a connection knows of its peer. Depends on
//! nothing else of the server.
pub mod auth;
pub mod conn_info;
pub(crate) mod keyed_search;
pub mod request_rate;
pub mod tenant;
pub(crate) mod token_forms;
pub mod tokens;
