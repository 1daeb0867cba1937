//! `spec.metadata`: the orchestrator's labels, checked as they arrive (a bounded string map;
//! the bounds are the registry's, `crate::registry::life`).
use serde_json::Value;

use crate::registry::life::{Metadata, MAX_METADATA_ENTRIES, MAX_METADATA_KEY, MAX_METADATA_VALUE};

fn key_ok(k: &str) -> bool {
    (1..=MAX_METADATA_KEY).contains(&k.len())
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A key as an error message shows it (cut, debug-quoted: it may be anything).
fn shown(k: &str) -> String {
    format!(
        "{:?}",
        k.chars().take(MAX_METADATA_KEY + 1).collect::<String>()
    )
}

/// Checks `spec.metadata` (absent or `null` is empty); the error is the `invalid_params`
/// message, naming the member.
pub fn parse_metadata(v: Option<Value>) -> Result<Metadata, String> {
    let map = match v {
        None | Some(Value::Null) => return Ok(Metadata::new()),
        Some(Value::Object(m)) => m,
        Some(_) => return Err("spec.metadata must be an object of strings".into()),
    };
    if map.len() > MAX_METADATA_ENTRIES {
        return Err(format!(
            "spec.metadata has {} entries, more than {MAX_METADATA_ENTRIES}",
            map.len()
        ));
    }
    let mut out = Metadata::new();
    for (k, v) in map {
        if !key_ok(&k) {
            return Err(format!(
                "spec.metadata key {}: keys are 1 to {MAX_METADATA_KEY} characters of \
                 [A-Za-z0-9_.-]",
                shown(&k)
            ));
        }
        let Value::String(s) = v else {
            return Err(format!("spec.metadata[{k:?}] must be a string"));
        };
        if s.len() > MAX_METADATA_VALUE {
            return Err(format!(
                "spec.metadata[{k:?}] is {} bytes, more than {MAX_METADATA_VALUE}",
                s.len()
            ));
        }
        out.insert(k, s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_is_a_bounded_string_map_and_each_violation_names_the_member() {
        let ok = parse_metadata(Some(
            json!({"owner": "ana", "ticket.id": "T-1", "a_b-c": ""}),
        ))
        .unwrap();
        assert_eq!(ok.len(), 3);
        assert!(parse_metadata(None).unwrap().is_empty());
        assert!(parse_metadata(Some(Value::Null)).unwrap().is_empty());
        let many: serde_json::Map<String, Value> = (0..=MAX_METADATA_ENTRIES)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect();
        let cases = [
            (json!(["a"]), "spec.metadata must be an object"),
            (Value::Object(many), "33 entries"),
            (json!({"": "v"}), "spec.metadata key \"\""),
            (json!({"a b": "v"}), "spec.metadata key \"a b\""),
            (json!({"k".repeat(65): "v"}), "1 to 64 characters"),
            (json!({"k": 1}), "spec.metadata[\"k\"] must be a string"),
            (
                json!({"k": "x".repeat(513)}),
                "spec.metadata[\"k\"] is 513 bytes",
            ),
        ];
        for (v, want) in cases {
            let e = parse_metadata(Some(v.clone())).unwrap_err();
            assert!(e.contains(want), "{v}: {e}");
        }
        // At the bounds exactly is fine.
        let at: serde_json::Map<String, Value> = (0..MAX_METADATA_ENTRIES)
            .map(|i| (format!("{i:0>64}"), json!("é".repeat(256))))
            .collect();
        assert_eq!(parse_metadata(Some(Value::Object(at))).unwrap().len(), 32);
    }
}
