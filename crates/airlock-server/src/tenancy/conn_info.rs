//! Who is on the other end of a connection.

/// Who is on the other end.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// Connection id, unique in this server process.
    pub id: String,
    /// Peer address, or `stdio`.
    pub peer: String,
    /// `websocket` or `stdio`.
    pub transport: &'static str,
    /// The tenant it acts for (its token's; [`crate::tenancy::tenant::Tenant::single`] otherwise).
    pub tenant: crate::tenancy::tenant::Tenant,
}
