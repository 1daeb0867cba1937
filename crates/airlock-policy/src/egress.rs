//! Egress modes: what a backend can enforce and what a workload runs in.

use crate::vocab::vocabulary;

/// How a sandbox's network egress is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Egress {
    /// Deny by default; allow only the named hosts.
    Allowlist,
    /// No network at all. The default: a spec that forgets egress gets the closed one.
    #[default]
    Closed,
    /// Egress cannot be confined. A backend may declare it honestly; nothing is ever served
    /// through it.
    Unrestricted,
}

vocabulary!(Egress, "egress mode", {
    Allowlist => "allowlist",
    Closed => "closed",
    Unrestricted => "unrestricted",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_and_default() {
        assert_eq!(Egress::default(), Egress::Closed);
        for e in Egress::ALL {
            assert_eq!(e.as_str().parse::<Egress>(), Ok(*e));
        }
        assert!("open".parse::<Egress>().is_err());
    }
}
