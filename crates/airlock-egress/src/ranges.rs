//! Address ranges the proxy never connects to unless the caller opted in: private,
//! loopback, link-local (cloud metadata lives there), carrier-grade NAT, multicast, reserved,
//! unspecified, and the IPv6 forms that embed an IPv4 address.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The name of the special range `ip` falls in, or `None` for an ordinary public address.
pub fn special_range(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

const METADATA_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip == METADATA_V4 => "cloud metadata (169.254.169.254)",
        (0, _, _) => "unspecified/this-network (0.0.0.0/8)",
        (10, _, _) => "private (10.0.0.0/8)",
        (100, 64..=127, _) => "carrier-grade NAT (100.64.0.0/10)",
        (127, _, _) => "loopback (127.0.0.0/8)",
        (169, 254, _) => "link-local (169.254.0.0/16)",
        (172, 16..=31, _) => "private (172.16.0.0/12)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation (TEST-NET)",
        (192, 88, 99) => "6to4 relay anycast (192.88.99.0/24)",
        (192, 168, _) => "private (192.168.0.0/16)",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, _, _) => "multicast (224.0.0.0/4)",
        (240..=255, _, _) => "reserved/broadcast (240.0.0.0/4)",
        _ => return None,
    })
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    // Forms that carry an IPv4 address: judge by the embedded address, and name the form.
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return Some("IPv4-compatible (::/96)");
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return v4_range(embedded(s[6], s[7])).map(|_| "NAT64 of a special IPv4 address");
    }
    Some(match s[0] {
        0x2002 => return v4_range(embedded(s[1], s[2])).map(|_| "6to4 of a special IPv4 address"),
        0x2001 if s[1] == 0x0db8 => "documentation (2001:db8::/32)",
        0x2001 if s[1] == 0 => "Teredo (2001::/32)",
        x if x & 0xfe00 == 0xfc00 => "unique local (fc00::/7)",
        x if x & 0xffc0 == 0xfe80 => "link-local (fe80::/10)",
        x if x & 0xffc0 == 0xfec0 => "site-local (fec0::/10)",
        x if x & 0xff00 == 0xff00 => "multicast (ff00::/8)",
        x if x & 0xe000 != 0x2000 => "not global unicast (outside 2000::/3)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Option<&'static str> {
        special_range(s.parse().unwrap())
    }

    #[test]
    fn special_v4() {
        for s in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "127.0.0.1",
            "127.0.0.2",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "100.100.100.200",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.18.0.1",
        ] {
            assert!(r(s).is_some(), "{s} should be special");
        }
        assert!(r("169.254.169.254").unwrap().contains("metadata"));
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "151.101.0.223",
        ] {
            assert_eq!(r(s), None, "{s} should be public");
        }
    }

    #[test]
    fn special_v6_and_embedded_v4() {
        for s in [
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:0a00:0001::1",
            "2001:db8::1",
            "::127.0.0.1",
            "2001::1",
            "fec0::1",
            "4000::1",
        ] {
            assert!(r(s).is_some(), "{s} should be special");
        }
        assert_eq!(r("::ffff:127.0.0.1"), Some("loopback (127.0.0.0/8)"));
        for s in [
            "2606:4700::1111",
            "2a04:4e42::223",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
        ] {
            assert_eq!(r(s), None, "{s} should be public");
        }
    }
}
