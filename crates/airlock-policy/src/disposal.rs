//! Coded disposal failures: the code is the contract, the detail is for a log.

use std::fmt;

use crate::vocab::vocabulary;

/// Why a disposal did not land. A closed set a caller branches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DisposalCode {
    /// The backend's service was never reached: retry.
    Unreachable,
    /// The delete did not finish within its bound: raise the bound.
    Timeout,
    /// The service refused the delete (usually a missing role): put it in front of a human.
    Refused,
    /// The backend could not find the sandbox in its own listing, so cannot say it is gone.
    Unlisted,
    /// The backend cannot tell which of the others it was. Prefer this to a guess.
    Unknown,
}

vocabulary!(DisposalCode, "disposal code", {
    Unreachable => "unreachable",
    Timeout => "timeout",
    Refused => "refused",
    Unlisted => "unlisted",
    Unknown => "unknown",
});

impl DisposalCode {
    /// How actionable the code is; folding keeps the most actionable. Higher wins:
    /// refused > timeout > unreachable > unlisted > unknown.
    #[must_use]
    pub const fn actionability(self) -> u8 {
        match self {
            DisposalCode::Refused => 4,
            DisposalCode::Timeout => 3,
            DisposalCode::Unreachable => 2,
            DisposalCode::Unlisted => 1,
            DisposalCode::Unknown => 0,
        }
    }
}

/// A disposal the backend knows did not land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisposalFailure {
    code: DisposalCode,
    details: Vec<String>,
}

impl DisposalFailure {
    /// A failure with the backend's own sentence as detail.
    pub fn new(code: DisposalCode, detail: impl Into<String>) -> DisposalFailure {
        DisposalFailure {
            code,
            details: vec![detail.into()],
        }
    }

    /// The code a caller acts on.
    #[must_use]
    pub fn code(&self) -> DisposalCode {
        self.code
    }

    /// Every detail folded into this failure, in the order they arrived. Never parse them.
    #[must_use]
    pub fn details(&self) -> &[String] {
        &self.details
    }

    /// Folds several failures into one carrying the most actionable code and every detail;
    /// `None` when there were none.
    pub fn fold(failures: impl IntoIterator<Item = DisposalFailure>) -> Option<DisposalFailure> {
        failures.into_iter().reduce(|mut acc, next| {
            if next.code.actionability() > acc.code.actionability() {
                acc.code = next.code;
            }
            acc.details.extend(next.details);
            acc
        })
    }
}

impl fmt::Display for DisposalFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.details.join("; "))
    }
}

impl std::error::Error for DisposalFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_keeps_the_most_actionable_code_and_every_detail() {
        let folded = DisposalFailure::fold([
            DisposalFailure::new(DisposalCode::Unknown, "a"),
            DisposalFailure::new(DisposalCode::Unreachable, "b"),
            DisposalFailure::new(DisposalCode::Refused, "c"),
            DisposalFailure::new(DisposalCode::Timeout, "d"),
        ])
        .unwrap();
        assert_eq!(folded.code(), DisposalCode::Refused);
        assert_eq!(folded.details(), ["a", "b", "c", "d"]);
        assert_eq!(DisposalFailure::fold([]), None);
    }

    #[test]
    fn actionability_is_a_total_order_over_all_codes() {
        let mut ranks: Vec<u8> = DisposalCode::ALL
            .iter()
            .map(|c| c.actionability())
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        assert_eq!(ranks.len(), DisposalCode::ALL.len());
    }
}
