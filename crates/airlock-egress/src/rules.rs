//! Host rules: `HOST[:PORT]` and `*.SUFFIX[:PORT]`, an allow list and a deny list (deny wins),
//! plus the address ranges a caller explicitly opted into.
//!
//! - `example.org` matches that name only; `*.example.org` matches every name *below* it
//!   (`a.example.org`, `a.b.example.org`) and **not** the apex `example.org` itself: name both
//!   when both are wanted.
//! - An allow rule without a port allows ports 80 and 443 only; `host:8080` allows that port
//!   only. A deny rule without a port denies every port.
//! - Names are compared lowercase, with one trailing dot removed. IP literals (`127.0.0.2`,
//!   `[::1]:8080`) match the same literal only, never a name that resolves to it.
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::Serialize;

use crate::cidr::Cidr;
use crate::error::RuleError;

/// Ports an allow rule without a port covers.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// Longest DNS name accepted (RFC 1035).
const MAX_NAME: usize = 253;
/// Longest label accepted (RFC 1035).
const MAX_LABEL: usize = 63;

/// What a rule's host part names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Exactly this name (normalised).
    Exact(String),
    /// Every name ending in `.SUFFIX` (the apex excluded); holds the suffix without the dot.
    Suffix(String),
    /// Exactly this address literal.
    Ip(IpAddr),
}

/// One `HOST[:PORT]` rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostRule {
    /// The host part.
    pub pattern: HostPattern,
    /// The port, when the rule names one.
    pub port: Option<u16>,
}

/// A request's host, normalised: a name or an address literal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name (lowercase, no trailing dot).
    Name(String),
    /// An address literal.
    Ip(IpAddr),
}

impl Host {
    /// Parse a request's host (no port; IPv6 in brackets or bare).
    pub fn parse(s: &str) -> Result<Host, RuleError> {
        let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
        if let Some(v6) = inner {
            return v6
                .parse::<std::net::Ipv6Addr>()
                .map(|a| Host::Ip(IpAddr::V6(a).to_canonical()))
                .map_err(|_| RuleError::Host(format!("{s:?} is not an IPv6 address")));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(Host::Ip(ip.to_canonical()));
        }
        normalise_name(s).map(Host::Name)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Ip(a) => write!(f, "{a}"),
        }
    }
}

fn normalise_name(s: &str) -> Result<String, RuleError> {
    let bad = |why: &str| RuleError::Host(format!("{:?}: {why}", truncate(s)));
    let name = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(bad("a host name has 1 to 253 characters"));
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > MAX_LABEL {
            return Err(bad("every label has 1 to 63 characters"));
        }
        let ok = label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok || label.starts_with('-') || label.ends_with('-') {
            return Err(bad(
                "only letters, digits, '-' and '_' may appear in a label",
            ));
        }
    }
    Ok(name)
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Split `HOST[:PORT]` (IPv6 literals in brackets when a port follows).
pub fn split_host_port(s: &str) -> Result<(&str, Option<u16>), RuleError> {
    let bad_port = || RuleError::Host(format!("{:?}: port must be 1-65535", truncate(s)));
    let parse_port = |p: &str| -> Result<u16, RuleError> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad_port());
        }
        p.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(bad_port)
    };
    if s.starts_with('[') {
        let Some(end) = s.find(']') else {
            return Err(RuleError::Host(format!("{:?}: unclosed '['", truncate(s))));
        };
        let (host, rest) = s.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            r => match r.strip_prefix(':') {
                Some(p) => Ok((host, Some(parse_port(p)?))),
                None => Err(RuleError::Host(format!(
                    "{:?}: junk after ']'",
                    truncate(s)
                ))),
            },
        };
    }
    match s.rsplit_once(':') {
        // More than one colon and no brackets: a bare IPv6 literal without a port.
        Some((h, _)) if h.contains(':') => Ok((s, None)),
        Some((h, p)) => Ok((h, Some(parse_port(p)?))),
        None => Ok((s, None)),
    }
}

impl FromStr for HostRule {
    type Err = RuleError;

    fn from_str(s: &str) -> Result<HostRule, RuleError> {
        let (host, port) = split_host_port(s.trim())?;
        let pattern = match host.strip_prefix("*.") {
            Some(suffix) => {
                let suffix = normalise_name(suffix)?;
                HostPattern::Suffix(suffix)
            }
            None if host.contains('*') => {
                return Err(RuleError::Host(format!(
                    "{:?}: a wildcard is only allowed as a leading '*.'",
                    truncate(s)
                )))
            }
            None => match Host::parse(host)? {
                Host::Name(n) => HostPattern::Exact(n),
                Host::Ip(ip) => HostPattern::Ip(ip),
            },
        };
        Ok(HostRule { pattern, port })
    }
}

impl HostRule {
    /// Whether the host part matches.
    pub fn matches_host(&self, host: &Host) -> bool {
        match (&self.pattern, host) {
            (HostPattern::Exact(p), Host::Name(n)) => p == n,
            (HostPattern::Suffix(s), Host::Name(n)) => n
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(p), Host::Ip(ip)) => p == ip,
            _ => false,
        }
    }

    fn allows_port(&self, port: u16) -> bool {
        match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        }
    }

    fn denies_port(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            HostPattern::Exact(n) => f.write_str(n)?,
            HostPattern::Suffix(s) => write!(f, "*.{s}")?,
            HostPattern::Ip(IpAddr::V6(a)) => write!(f, "[{a}]")?,
            HostPattern::Ip(a) => write!(f, "{a}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// The outcome of the host rules alone (before any resolution).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostVerdict {
    /// An allow rule matches host and port, and no deny rule does.
    Allowed,
    /// A deny rule matches.
    Denied,
    /// An allow rule names the host, but not this port.
    PortNotAllowed,
    /// No allow rule names the host.
    NotListed,
}

/// The full rule set of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Hosts that may be reached.
    pub allow: Vec<HostRule>,
    /// Hosts that may never be reached, whatever `allow` says.
    pub deny: Vec<HostRule>,
    /// Private, loopback, link-local or otherwise special ranges explicitly opted into.
    pub allow_private: Vec<Cidr>,
}

impl Rules {
    /// Rules from the command-line spellings.
    pub fn parse(
        allow: &[impl AsRef<str>],
        deny: &[impl AsRef<str>],
        allow_private: &[impl AsRef<str>],
    ) -> Result<Rules, RuleError> {
        Ok(Rules {
            allow: allow
                .iter()
                .map(|s| s.as_ref().parse())
                .collect::<Result<_, _>>()?,
            deny: deny
                .iter()
                .map(|s| s.as_ref().parse())
                .collect::<Result<_, _>>()?,
            allow_private: allow_private
                .iter()
                .map(|s| s.as_ref().parse())
                .collect::<Result<_, _>>()?,
        })
    }

    /// Deny wins, then an allow rule must match host and port.
    pub fn check(&self, host: &Host, port: u16) -> HostVerdict {
        if self
            .deny
            .iter()
            .any(|r| r.matches_host(host) && r.denies_port(port))
        {
            return HostVerdict::Denied;
        }
        let mut named = false;
        for r in self.allow.iter().filter(|r| r.matches_host(host)) {
            if r.allows_port(port) {
                return HostVerdict::Allowed;
            }
            named = true;
        }
        if named {
            HostVerdict::PortNotAllowed
        } else {
            HostVerdict::NotListed
        }
    }

    /// Whether `ip` falls in a range the caller opted into.
    pub fn private_allowed(&self, ip: IpAddr) -> bool {
        self.allow_private.iter().any(|c| c.contains(ip))
    }

    /// A short, bounded summary of the allow list, for deny messages.
    pub fn allow_summary(&self) -> String {
        const SHOWN: usize = 8;
        let mut parts: Vec<String> = self
            .allow
            .iter()
            .take(SHOWN)
            .map(|r| r.to_string())
            .collect();
        if self.allow.len() > SHOWN {
            parts.push(format!("and {} more", self.allow.len() - SHOWN));
        }
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        Rules::parse(allow, deny, &[] as &[&str]).unwrap()
    }

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    #[test]
    fn exact_and_suffix_matching() {
        let r = rules(&["pypi.org", "*.pythonhosted.org"], &[]);
        assert_eq!(r.check(&host("pypi.org"), 443), HostVerdict::Allowed);
        assert_eq!(r.check(&host("PyPI.org."), 443), HostVerdict::Allowed);
        assert_eq!(
            r.check(&host("files.pythonhosted.org"), 443),
            HostVerdict::Allowed
        );
        assert_eq!(
            r.check(&host("a.b.pythonhosted.org"), 80),
            HostVerdict::Allowed
        );
        // The apex is not covered by the wildcard, nor are look-alikes.
        assert_eq!(
            r.check(&host("pythonhosted.org"), 443),
            HostVerdict::NotListed
        );
        assert_eq!(
            r.check(&host("evilpythonhosted.org"), 443),
            HostVerdict::NotListed
        );
        assert_eq!(
            r.check(&host("pypi.org.evil.example"), 443),
            HostVerdict::NotListed
        );
        assert_eq!(r.check(&host("sub.pypi.org"), 443), HostVerdict::NotListed);
    }

    #[test]
    fn ports_default_to_web_and_explicit_ports_are_exact() {
        let r = rules(&["a.example", "b.example:8080"], &[]);
        assert_eq!(r.check(&host("a.example"), 80), HostVerdict::Allowed);
        assert_eq!(r.check(&host("a.example"), 22), HostVerdict::PortNotAllowed);
        assert_eq!(r.check(&host("b.example"), 8080), HostVerdict::Allowed);
        assert_eq!(
            r.check(&host("b.example"), 443),
            HostVerdict::PortNotAllowed
        );
    }

    #[test]
    fn deny_wins() {
        let r = rules(
            &["*.example.com", "x.example.com"],
            &["evil.example.com", "x.example.com:443"],
        );
        assert_eq!(r.check(&host("ok.example.com"), 443), HostVerdict::Allowed);
        assert_eq!(r.check(&host("evil.example.com"), 443), HostVerdict::Denied);
        assert_eq!(r.check(&host("evil.example.com"), 80), HostVerdict::Denied);
        assert_eq!(r.check(&host("x.example.com"), 443), HostVerdict::Denied);
        assert_eq!(r.check(&host("x.example.com"), 80), HostVerdict::Allowed);
    }

    #[test]
    fn ip_literals_match_only_literals() {
        let r = rules(&["127.0.0.2:9000", "[::1]:9000"], &[]);
        assert_eq!(r.check(&host("127.0.0.2"), 9000), HostVerdict::Allowed);
        assert_eq!(r.check(&host("[::1]"), 9000), HostVerdict::Allowed);
        assert_eq!(
            r.check(&host("[::ffff:127.0.0.2]"), 9000),
            HostVerdict::Allowed
        );
        assert_eq!(r.check(&host("localhost"), 9000), HostVerdict::NotListed);
    }

    #[test]
    fn rejects_malformed_rules() {
        for s in [
            "",
            "*",
            "*.",
            "a.*.com",
            "ex ample.com",
            "a..b",
            "-a.com",
            "host:0",
            "host:65536",
            "host:",
            "host:+1",
            "[::1",
            "[::1]x",
            "a_b.com:99999",
            "*example.com",
            "\u{e9}.com",
        ] {
            assert!(s.parse::<HostRule>().is_err(), "{s:?} parsed");
        }
        let long = format!("{}.com", "a".repeat(64));
        assert!(long.parse::<HostRule>().is_err());
        assert_eq!(
            "*.Example.COM:8443"
                .parse::<HostRule>()
                .unwrap()
                .to_string(),
            "*.example.com:8443"
        );
        assert_eq!("[::1]".parse::<HostRule>().unwrap().to_string(), "[::1]");
    }

    #[test]
    fn summary_is_bounded() {
        let many: Vec<String> = (0..20).map(|i| format!("h{i}.example")).collect();
        let r = Rules::parse(&many, &[] as &[&str], &[] as &[&str]).unwrap();
        let s = r.allow_summary();
        assert!(
            s.contains("h7.example") && !s.contains("h8.example") && s.ends_with("and 12 more")
        );
        assert_eq!(Rules::default().allow_summary(), "nothing");
    }
}
