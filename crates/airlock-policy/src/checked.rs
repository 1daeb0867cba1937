//! The fields `policy.toml`'s serde structs are made of, and how each keeps the file's own
//! error messages.
//!
//! Every field is a [`Checked`]: deserializing it never fails; it holds the typed value or the
//! [`Fault`] (where below the field, the value as TOML, what is wrong). Each section is a
//! `#[serde(deny_unknown_fields)]` struct read by [`section`], which names the key serde
//! refused, and turns itself into its typed value reading its fields in a fixed order, a
//! fault placed under the field's name ([`take`]). The file's first problem is so reported as
//! before: a table's unknown key before its values, the values in the order a section reads
//! them, each naming the dotted key and the value.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::str::FromStr;

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use toml::{Table, Value};

use crate::file_error::PolicyFileError;

/// What is wrong with one value.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    /// Where, below the field that holds it: `""`, `".key"`, `"[2]"`, joined outwards.
    at: String,
    /// The value, as TOML (or a summary such as `[2000 items]`).
    value: String,
    kind: FaultKind,
}

#[derive(Debug, Clone)]
enum FaultKind {
    WrongType(&'static str),
    Invalid(String),
    /// Above the value of the key `sibling` of the same table, `limit`.
    Exceeds {
        sibling: &'static str,
        limit: u64,
    },
    Unknown(&'static [&'static str]),
}

impl Fault {
    /// `v` is not `expected` (a TOML type: "an integer", "a table").
    pub(crate) fn wrong_type(v: &Value, expected: &'static str) -> Fault {
        Fault {
            at: String::new(),
            value: v.to_string(),
            kind: FaultKind::WrongType(expected),
        }
    }

    /// `value` has the right type but is not acceptable, for `reason`.
    pub(crate) fn invalid(value: String, reason: impl Into<String>) -> Fault {
        Fault {
            at: String::new(),
            value,
            kind: FaultKind::Invalid(reason.into()),
        }
    }

    /// `value` is above `limit`, the value of the key `sibling` of the same table.
    pub(crate) fn exceeds(value: u64, sibling: &'static str, limit: u64) -> Fault {
        Fault {
            at: String::new(),
            value: value.to_string(),
            kind: FaultKind::Exceeds { sibling, limit },
        }
    }

    /// The same fault, one step further out: `at` is `".name"` or `"[i]"`.
    #[must_use]
    pub(crate) fn below(mut self, at: &str) -> Fault {
        self.at.insert_str(0, at);
        self
    }

    /// The error for a fault read up to the file's top table.
    pub(crate) fn into_error(self) -> PolicyFileError {
        let key = self.at.strip_prefix('.').unwrap_or(&self.at).to_owned();
        match self.kind {
            FaultKind::WrongType(expected) => PolicyFileError::WrongType {
                key,
                value: self.value,
                expected,
            },
            FaultKind::Invalid(reason) => PolicyFileError::InvalidValue {
                key,
                value: self.value,
                reason,
            },
            FaultKind::Exceeds { sibling, limit } => {
                let table = key.rsplit_once('.').map_or("", |(table, _)| table);
                PolicyFileError::InvalidValue {
                    reason: format!("must not exceed {table}.{sibling} ({limit})"),
                    key,
                    value: self.value,
                }
            }
            FaultKind::Unknown(expected) => PolicyFileError::UnknownKey { key, expected },
        }
    }
}

/// A field as read: its typed value, or its fault.
#[derive(Debug)]
pub(crate) struct Checked<T>(pub(crate) Result<T, Fault>);

impl<'de, T: FromValue> Deserialize<'de> for Checked<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Checked(T::from_value(&v)))
    }
}

/// An optional field of a section.
pub(crate) type Field<T> = Option<Checked<T>>;

/// An optional field's value, or its fault placed under `.name`.
pub(crate) fn take<T>(field: Field<T>, name: &str) -> Result<Option<T>, Fault> {
    field
        .map(|c| c.0.map_err(|f| f.below(&format!(".{name}"))))
        .transpose()
}

/// An optional integer field's value, or its fault placed under `.name`.
pub(crate) fn take_int<const MIN: u64, const MAX: u64>(
    field: Field<Bounded<MIN, MAX>>,
    name: &str,
) -> Result<Option<u64>, Fault> {
    Ok(take(field, name)?.map(|Bounded(n)| n))
}

/// A type read from one TOML value, checked as `policy.toml` checks it.
pub(crate) trait FromValue: Sized {
    /// `v` as this type, or what is wrong with it.
    fn from_value(v: &Value) -> Result<Self, Fault>;
}

/// A section, a `deny_unknown_fields` serde struct whose fields are [`Checked`], read from a
/// table. A key serde refuses is named: the table's first key not in `keys`, the section's
/// fields in their order (the error lists them).
pub(crate) fn section<T: DeserializeOwned>(
    v: &Value,
    keys: &'static [&'static str],
) -> Result<T, Fault> {
    let table = v
        .as_table()
        .ok_or_else(|| Fault::wrong_type(v, "a table"))?;
    from_table(table).map_err(
        |message| match table.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(k) => Fault {
                at: format!(".{k}"),
                value: String::new(),
                kind: FaultKind::Unknown(keys),
            },
            None => Fault::invalid(v.to_string(), message),
        },
    )
}

/// `table` deserialized as `T`, or serde's message. Through TOML text, not `toml::Value`'s
/// own deserializer: that one hands a datetime over as a string, which a string field would
/// then take.
pub(crate) fn from_table<T: DeserializeOwned>(table: &Table) -> Result<T, String> {
    let text = toml::to_string(table).map_err(|e| e.to_string())?;
    toml::from_str(&text).map_err(|e| e.message().to_owned())
}

/// An integer in `MIN..=MAX`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounded<const MIN: u64, const MAX: u64>(pub(crate) u64);

impl<const MIN: u64, const MAX: u64> FromValue for Bounded<MIN, MAX> {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let n = v
            .as_integer()
            .ok_or_else(|| Fault::wrong_type(v, "an integer"))?;
        match u64::try_from(n) {
            Ok(n) if (MIN..=MAX).contains(&n) => Ok(Bounded(n)),
            _ => Err(Fault::invalid(
                v.to_string(),
                format!("must be between {MIN} and {MAX}"),
            )),
        }
    }
}

/// A word of a vocabulary (an isolation rung, a capability): a string its `FromStr` takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Word<T>(pub(crate) T);

impl<T: FromStr> FromValue for Word<T>
where
    T::Err: Display,
{
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let s = v.as_str().ok_or_else(|| Fault::wrong_type(v, "a string"))?;
        s.parse()
            .map(Word)
            .map_err(|e: T::Err| Fault::invalid(v.to_string(), e.to_string()))
    }
}

/// An array of distinct [`Word`]s; a bad or repeated one is named by its index.
#[derive(Debug, Clone)]
pub(crate) struct WordSet<T>(pub(crate) BTreeSet<T>);

impl<T: FromStr + Ord> FromValue for WordSet<T>
where
    T::Err: Display,
{
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let items = v
            .as_array()
            .ok_or_else(|| Fault::wrong_type(v, "an array of strings"))?;
        let mut out = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("[{i}]");
            let Word(word) = Word::<T>::from_value(item).map_err(|f| f.below(&at))?;
            if !out.insert(word) {
                return Err(Fault::invalid(item.to_string(), "listed twice").below(&at));
            }
        }
        Ok(WordSet(out))
    }
}

/// Test support: `keys` are the fields of the section `T`, in serde's order (the list an
/// unknown key's error gives is the one serde refuses by).
#[cfg(test)]
pub(crate) fn assert_keys<T: DeserializeOwned>(keys: &[&str]) {
    let table = Table::from_iter([("not_a_key".to_owned(), Value::Integer(0))]);
    let refused = from_table::<T>(&table).err();
    let listed: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    let listed = match &listed[..] {
        [a, b] => format!("{a} or {b}"),
        _ => format!("one of {}", listed.join(", ")),
    };
    let expected = format!("unknown field `not_a_key`, expected {listed}");
    assert_eq!(refused.as_deref(), Some(expected.as_str()));
}
