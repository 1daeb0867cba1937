//! The shared parse error for every vocabulary enum, and the macro that gives each enum its
//! string form.
//!
//! Every enum here has exactly one spelling per variant and `FromStr` refuses anything else:
//! a declaration reaches this vocabulary out of configuration nobody re-reads, so a guess would
//! be silent.

use thiserror::Error;

/// A string that names no member of a vocabulary enum.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum VocabError {
    /// The value is not one of the enum's spellings.
    #[error("unknown {vocabulary} {value:?} (expected one of: {})", expected.join(", "))]
    Unknown {
        /// Which vocabulary was being parsed (e.g. "isolation rung").
        vocabulary: &'static str,
        /// The refused value, verbatim.
        value: String,
        /// Every accepted spelling.
        expected: &'static [&'static str],
    },
    /// The value is a retired spelling that is refused forever rather than aliased.
    #[error("{vocabulary} {value:?} is a retired spelling and is refused: {why}")]
    Retired {
        /// Which vocabulary was being parsed.
        vocabulary: &'static str,
        /// The refused value, verbatim.
        value: String,
        /// Why it is not aliased.
        why: &'static str,
    },
}

/// Implements `as_str`, `ALL`, `Display`, `FromStr`, `Serialize` and `Deserialize` for a
/// fieldless enum from one table of `Variant => "spelling"` pairs.
macro_rules! vocabulary {
    ($ty:ident, $what:literal, { $($variant:ident => $s:literal),+ $(,)? }) => {
        impl $ty {
            /// Every member, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            /// Every accepted spelling, in declaration order.
            pub const SPELLINGS: &'static [&'static str] = &[$($s),+];

            /// The one spelling of this member.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $s),+
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::vocab::VocabError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $crate::vocab::retired($what, s)?;
                match s {
                    $($s => Ok($ty::$variant),)+
                    other => Err($crate::vocab::VocabError::Unknown {
                        vocabulary: $what,
                        value: other.to_owned(),
                        expected: $ty::SPELLINGS,
                    }),
                }
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                raw.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use vocabulary;

/// The vocabulary of [`crate::Isolation`] (its `vocabulary!` table names it the same way).
const ISOLATION_RUNG: &str = "isolation rung";

/// Refuses retired spellings before the table is consulted.
///
/// `"process"` once meant "no boundary at all" and is now spelled `none`; the real separate
/// process rung is `os_process`. Aliasing the old string would rank a declaration two rungs
/// higher than the boundary it draws, so it is refused in every vocabulary, forever.
pub(crate) fn retired(vocabulary: &'static str, value: &str) -> Result<(), VocabError> {
    if vocabulary == ISOLATION_RUNG && value == "process" {
        return Err(VocabError::Retired {
            vocabulary,
            value: value.to_owned(),
            why:
                "it once meant no boundary (now \"none\"); a separate OS process is \"os_process\"",
        });
    }
    Ok(())
}
