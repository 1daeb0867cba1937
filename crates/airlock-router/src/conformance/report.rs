//! What a conformance suite found: one outcome per probe.
use std::fmt;

/// How one probe ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The backend did what it declares.
    Pass,
    /// It did not; the string says what was seen.
    Fail(String),
}

/// One probe's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Short identifier.
    pub name: &'static str,
    /// Why the probe exists: the claim it holds the backend to.
    pub reason: &'static str,
    /// What happened.
    pub outcome: Outcome,
}

/// One suite's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceReport {
    /// The suite's name.
    pub suite: &'static str,
    /// Every probe, in the order run.
    pub probes: Vec<Probe>,
}

impl ConformanceReport {
    pub(crate) fn new(suite: &'static str) -> ConformanceReport {
        ConformanceReport {
            suite,
            probes: Vec::new(),
        }
    }

    pub(crate) fn record(
        &mut self,
        name: &'static str,
        reason: &'static str,
        result: Result<(), String>,
    ) {
        self.probes.push(Probe {
            name,
            reason,
            outcome: match result {
                Ok(()) => Outcome::Pass,
                Err(seen) => Outcome::Fail(seen),
            },
        });
    }

    /// Whether every probe passed (and there was at least one).
    #[must_use]
    pub fn passed(&self) -> bool {
        !self.probes.is_empty() && self.probes.iter().all(|p| p.outcome == Outcome::Pass)
    }

    /// The probes that failed.
    #[must_use]
    pub fn failures(&self) -> Vec<&Probe> {
        self.probes
            .iter()
            .filter(|p| p.outcome != Outcome::Pass)
            .collect()
    }

    /// The named probe's outcome.
    #[must_use]
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.probes
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.outcome)
    }

    /// Panics with every failure listed, for use in a test.
    ///
    /// # Panics
    /// When any probe failed.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed(), "{self}");
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "conformance suite {}:", self.suite)?;
        for p in &self.probes {
            match &p.outcome {
                Outcome::Pass => writeln!(f, "  pass {}", p.name)?,
                Outcome::Fail(seen) => {
                    writeln!(f, "  FAIL {} — {} — saw: {seen}", p.name, p.reason)?
                }
            }
        }
        Ok(())
    }
}

/// `Err` with a description unless `cond`.
pub(crate) fn check(cond: bool, seen: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(seen())
    }
}
