//! Address ranges (`10.0.0.0/8`, `fd00::/8`, a bare address meaning one host), as the
//! `--allow-private` opt-in names them.
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::error::RuleError;

/// An address prefix. IPv4-mapped IPv6 addresses are compared as the IPv4 address they map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// A prefix; `prefix` must not exceed the family's width.
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Cidr, RuleError> {
        let addr = addr.to_canonical();
        if prefix > width(addr) {
            return Err(RuleError::Cidr(format!("{addr}/{prefix}: prefix too long")));
        }
        Ok(Cidr { addr, prefix })
    }

    /// Whether `ip` lies inside this range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u128::from(u32::from(net)), 32, self.prefix)
                    == masked(u128::from(u32::from(ip)), 32, self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), 128, self.prefix)
                    == masked(u128::from(ip), 128, self.prefix)
            }
            _ => false,
        }
    }
}

fn width(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn masked(bits: u128, width: u8, prefix: u8) -> u128 {
    let host_bits = u32::from(width - prefix.min(width));
    if host_bits >= 128 {
        0
    } else {
        (bits >> host_bits) << host_bits
    }
}

impl FromStr for Cidr {
    type Err = RuleError;

    fn from_str(s: &str) -> Result<Cidr, RuleError> {
        let bad = || RuleError::Cidr(format!("{s:?} is not an address or ADDRESS/PREFIX"));
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let addr = addr.to_canonical();
        let prefix = match prefix {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().map_err(|_| bad())?
            }
            Some(_) => return Err(bad()),
            None => width(addr),
        };
        Cidr::new(addr, prefix)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn contains_v4_and_v6() {
        let c: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(c.contains(ip("10.255.1.2")));
        assert!(!c.contains(ip("11.0.0.1")));
        assert!(
            c.contains(ip("::ffff:10.1.2.3")),
            "mapped v6 compares as v4"
        );
        let one: Cidr = "127.0.0.2".parse().unwrap();
        assert!(one.contains(ip("127.0.0.2")) && !one.contains(ip("127.0.0.3")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("8.8.8.8")) && !all.contains(ip("::1")));
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "host/8",
            "1.2.3.4/8/8",
        ] {
            assert!(s.parse::<Cidr>().is_err(), "{s}");
        }
        assert_eq!(
            "10.1.2.3/8".parse::<Cidr>().unwrap().to_string(),
            "10.1.2.3/8"
        );
    }
}
