//! The filter profiles, and what each allows on the network.

/// The two filter profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Python guests: no process creation (threads allowed), no new sockets.
    Run,
    /// Commands: process creation allowed; no new sockets and the rest of the deny-list hold.
    Exec,
}

/// What a profile allows on the network, on top of the inherited socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// No new sockets at all (`closed` egress).
    #[default]
    None,
    /// `allowlist` egress: TCP client sockets (`AF_INET`/`AF_INET6`, `SOCK_STREAM`, protocol
    /// 0 or TCP) and `connect`; still no UDP, raw, netlink, unix or packet sockets, no
    /// `socketpair`, `bind`, `listen` or `accept`. Landlock limits `connect` to the proxy port.
    ProxyClient,
    /// A sandbox whose network namespace holds only `lo` (nothing leaves it): the same TCP
    /// sockets as [`Network::ProxyClient`], and servers on them: `bind`, `listen`, `accept`,
    /// `accept4` as well as `connect`, `getsockname`, `getpeername`, `getsockopt`,
    /// `setsockopt` (still without Fast Open or buffer sizes) and `shutdown`. Still no UDP,
    /// raw, netlink, unix or packet sockets.
    Loopback,
}
