//! Listeners and bytes: the WebSocket server and the stdio framing under the JSON-RPC face,
//! connection admission, the reverse proxy of exposed ports, and the ops HTTP endpoints.
mod accept;
pub mod framed;
pub(crate) mod ops_http;
pub mod ops_listener;
pub mod port_proxy;
pub mod prefixed;
pub mod ws;
