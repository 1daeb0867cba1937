//! Vetting one request: host rules first (a name off the list is never even resolved, so the
//! sandbox cannot use the broker's DNS as a side channel), then the broker's own resolution,
//! then every resolved address against the special ranges. The caller connects only to the
//! addresses returned here and never resolves again, which closes DNS rebinding.
use std::net::IpAddr;
use std::time::Duration;

use crate::decision::DenyReason;
use crate::ranges::special_range;
use crate::resolve::{Resolver, MAX_ADDRESSES};
use crate::rules::{Host, HostVerdict, Rules};

/// The addresses `host:port` may be reached at, or why it may not be.
///
/// A name with *any* address in a special range that was not opted into is denied as a
/// whole: a mixed answer is what a rebinding attack looks like.
pub async fn vet(
    rules: &Rules,
    resolver: &dyn Resolver,
    host: &Host,
    port: u16,
    timeout: Duration,
) -> Result<Vec<IpAddr>, DenyReason> {
    match rules.check(host, port) {
        HostVerdict::Allowed => {}
        HostVerdict::Denied => return Err(DenyReason::HostDenied),
        HostVerdict::PortNotAllowed => return Err(DenyReason::PortNotAllowed),
        HostVerdict::NotListed => return Err(DenyReason::HostNotAllowed),
    }
    let addrs = match host {
        Host::Ip(ip) => vec![*ip],
        Host::Name(name) => match tokio::time::timeout(timeout, resolver.resolve(name, port)).await
        {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Err(DenyReason::ResolutionFailed(e.to_string())),
            Err(_) => return Err(DenyReason::ResolutionFailed("timed out".into())),
        },
    };
    if addrs.is_empty() {
        return Err(DenyReason::ResolutionFailed("no addresses".into()));
    }
    let addrs: Vec<IpAddr> = addrs
        .into_iter()
        .take(MAX_ADDRESSES)
        .map(|a| a.to_canonical())
        .collect();
    for ip in &addrs {
        if let Some(range) = special_range(*ip) {
            if !rules.private_allowed(*ip) {
                return Err(DenyReason::ForbiddenAddress { ip: *ip, range });
            }
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::StaticResolver;

    const T: Duration = Duration::from_secs(1);

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn rules(allow: &[&str], private: &[&str]) -> Rules {
        Rules::parse(allow, &[] as &[&str], private).unwrap()
    }

    #[tokio::test]
    async fn a_name_flipping_from_public_to_private_is_denied_when_it_flips() {
        let r = StaticResolver::new();
        r.answer(
            "flip.example",
            vec![vec![ip("93.184.216.34")], vec![ip("169.254.169.254")]],
        );
        let rules = rules(&["flip.example"], &[]);
        let h = Host::parse("flip.example").unwrap();
        assert_eq!(
            vet(&rules, &r, &h, 443, T).await,
            Ok(vec![ip("93.184.216.34")])
        );
        match vet(&rules, &r, &h, 443, T).await {
            Err(DenyReason::ForbiddenAddress { ip: got, range }) => {
                assert_eq!(got, ip("169.254.169.254"));
                assert!(range.contains("metadata"));
            }
            other => panic!("expected a forbidden address, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_mixed_answer_is_denied_and_mapped_addresses_are_unwrapped() {
        let r = StaticResolver::new();
        r.answer(
            "mixed.example",
            vec![vec![ip("93.184.216.34"), ip("::ffff:10.0.0.1")]],
        );
        let rules = rules(&["mixed.example"], &[]);
        let h = Host::parse("mixed.example").unwrap();
        assert_eq!(
            vet(&rules, &r, &h, 80, T).await.unwrap_err().kind(),
            "forbidden_address"
        );
    }

    #[tokio::test]
    async fn private_ranges_need_an_explicit_opt_in() {
        let r = StaticResolver::new();
        r.answer("localhost", vec![vec![ip("127.0.0.1")]]);
        let h = Host::parse("localhost").unwrap();
        let closed = rules(&["localhost:8080"], &[]);
        assert_eq!(
            vet(&closed, &r, &h, 8080, T).await.unwrap_err().kind(),
            "forbidden_address"
        );
        let opted = rules(&["localhost:8080"], &["127.0.0.1/32"]);
        assert_eq!(
            vet(&opted, &r, &h, 8080, T).await,
            Ok(vec![ip("127.0.0.1")])
        );
        // An opt-in for one address does not cover its neighbour.
        let lit = Host::parse("127.0.0.2").unwrap();
        let narrow = rules(&["127.0.0.2:8080"], &["127.0.0.1/32"]);
        assert_eq!(
            vet(&narrow, &r, &lit, 8080, T).await.unwrap_err().kind(),
            "forbidden_address"
        );
    }

    #[tokio::test]
    async fn names_off_the_list_are_never_resolved() {
        let r = StaticResolver::new();
        r.answer(
            "secret-data.attacker.example",
            vec![vec![ip("1.2.3.4")], vec![ip("1.2.3.5")]],
        );
        let rules = rules(&["pypi.org"], &[]);
        let h = Host::parse("secret-data.attacker.example").unwrap();
        assert_eq!(
            vet(&rules, &r, &h, 443, T).await,
            Err(DenyReason::HostNotAllowed)
        );
        assert_eq!(
            r.pending("secret-data.attacker.example"),
            1,
            "the resolver was asked"
        );
    }

    #[tokio::test]
    async fn resolution_failure_and_empty_answers_deny() {
        let r = StaticResolver::new();
        r.answer("empty.example", vec![vec![]]);
        let rules = rules(&["empty.example", "missing.example"], &[]);
        for name in ["empty.example", "missing.example"] {
            let h = Host::parse(name).unwrap();
            assert_eq!(
                vet(&rules, &r, &h, 443, T).await.unwrap_err().kind(),
                "resolution_failed"
            );
        }
    }
}
